"""What the L2 flush before each timed call leaves in a GEMM's timed window (needs a GPU).

    PYTHONPATH=$PWD python3 scripts/flush_probe.py --shapes 64x8192x8192,4096x8192x8192

A flush that writes a buffer four times L2's size leaves L2 full of dirty lines, and the timed call's first misses
must write them back to DRAM before they can allocate: up to L2's size of write traffic inside the window, which
weighs on a kernel bound by DRAM and hardly on one bound by its tensor cores. The evaluator's flush
(`timing.L2Flush`) reads its buffer instead. This times gemm/cuda_wgmma's own plan and cuBLAS (torch.matmul),
interleaved as the evaluator does (`time_as_configured`), under each flush in turn:
  - read: the evaluator's (every line of L2 replaced by a clean one);
  - write: the buffer written instead (`fill_`, the evaluator's flush before 2026-12-06);
  - none: no flush (what a call finds cached when nothing evicts it);
and prints each one's µs and the ratio per flush.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.gemm_config_sweep import _shapes, variant  # noqa: E402


def flushes():
    from avo.evaluate.worker import timing

    read = timing.L2Flush.__call__

    def write(self):
        self.buffer.fill_(1)

    def none(self):
        pass

    return timing, {"read": read, "write": write, "none": none}


def main() -> None:
    import torch

    from avo.config import EvalConfig
    from avo.evaluate.worker.timing import Contender, InputRotation, time_as_configured
    from avo.gpus import resolve

    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", type=_shapes, required=True, help="MxNxK,...")
    args = parser.parse_args()
    cfg, gpu = EvalConfig(), resolve("auto", "cuda")
    gemm = variant("plan", {}, Path(tempfile.mkdtemp()))
    timing, modes = flushes()
    rows = []
    for case, m, n, k in args.shapes:
        sources = [(torch.randn((m, k), device="cuda", dtype=torch.bfloat16),
                    torch.randn((k, n), device="cuda", dtype=torch.bfloat16)) for _ in range(cfg.input_sets)]
        rotation = InputRotation(sources, seed=7)
        contenders = [Contender("cublas", rotation, lambda x: torch.matmul(*x)),
                      Contender("avo", rotation, lambda x: gemm(*x))]
        for mode, call in modes.items():
            timing.L2Flush.__call__ = call
            try:
                measured = time_as_configured(contenders, cfg, device="cuda", l2_bytes=gpu.l2_mb << 20,
                                              paired_with="cublas")
            finally:
                timing.L2Flush.__call__ = modes["read"]
            lib, ours = measured["cublas"].ms * 1e3, measured["avo"].ms * 1e3
            rows.append((case, mode, ours, lib, lib / ours))
            print(f"{case:20s} {mode:11s} avo {ours:8.1f} us  cublas {lib:8.1f} us  x{lib / ours:.3f}", flush=True)
        del sources, rotation, contenders
        torch.cuda.empty_cache()
    print(f"\n{torch.cuda.get_device_name()}\n")
    print("| shape | flush | avo µs | cuBLAS µs | ratio |\n|---|---|---:|---:|---:|")
    for case, mode, ours, lib, ratio in rows:
        print(f"| {case} | {mode} | {ours:.1f} | {lib:.1f} | {ratio:.3f} |")


if __name__ == "__main__":
    main()
