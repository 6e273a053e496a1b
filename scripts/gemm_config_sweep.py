"""gemm/cuda_wgmma's configurations side by side on the shapes where the per-shape choice matters: every tile build
and K split the wrapper could take, timed against torch.matmul (cuBLAS) in one process, interleaved.

Each time is the median of `--reps` calls, each preceded by an L2 flush and a GPU spin that hides the host's launch
work (as the evaluator times), so the figures are the GPU's. Prints one line per shape and configuration (speedup
over cuBLAS) and the best one per shape; `--json` keeps them all.

    python3 scripts/gemm_config_sweep.py --suite wide --max-m 1024 --json sweep.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SEED = ROOT / "kernels" / "gemm" / "cuda_wgmma"
VARIANTS = {  # name -> knob settings of the seed's kernel.py (bucketed entries as NAME@BUCKET)
    "few64x256s4": {"FEW_ROWS": 64, "BLOCK_N@few": 256, "STAGES@few": 4},
    "few64x128s6": {"FEW_ROWS": 64, "BLOCK_N@few": 128, "STAGES@few": 6},
    "large128x256s3": {"FIT_WIDTHS": False, "BLOCK_N": 256, "STAGES": 3},
    "large128x128s4": {"FIT_WIDTHS": False, "BLOCK_N": 128, "STAGES": 4},
    "large128x192s3": {"FIT_WIDTHS": False, "BLOCK_N": 192, "STAGES": 3},
}


def variant(name: str, settings: dict, root: Path):
    """The seed with `settings` written into its knobs (the heuristic agent's own editor), loaded."""
    from avo.agent.heuristic.knobs import render
    from avo.evaluate.worker.loader import load_entry

    folder = root / name
    folder.mkdir()
    for path in SEED.iterdir():
        if path.is_file():
            (folder / path.name).write_bytes(path.read_bytes())
    (folder / "kernel.py").write_text(render((SEED / "kernel.py").read_text(), settings))
    return load_entry(folder, "gemm")


def forced(gemm, split: int):
    """The variant's wrapper with its K split fixed (its own plan otherwise), planned afresh."""
    g = gemm.__globals__
    plan = g.setdefault("_own_plan", g["plan"])
    g["plan"] = lambda M, N, K, sms: (*plan(M, N, K, sms)[:2], min(split, -(-K // 64)))
    g["_PLANS"].clear()
    return gemm


def timed(fn, reps: int, flush) -> float:
    import torch

    times = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(200_000)  # the host queues the call while the GPU spins
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> None:
    import torch

    from avo.tasks import load

    parser = argparse.ArgumentParser()
    parser.add_argument("--suite", default="wide")
    parser.add_argument("--max-m", type=int, default=1024)
    parser.add_argument("--splits", default="1,2,3,4,6,8")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    splits = [int(s) for s in args.splits.split(",")]
    root = Path(tempfile.mkdtemp())
    entries = {name: variant(name, settings, root) for name, settings in VARIANTS.items()}
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rows = []
    for case in load("gemm").cases(args.suite):
        m, n, k = case.params["M"], case.params["N"], case.params["K"]
        if m > args.max_m:
            continue
        a = torch.randn((m, k), device="cuda", dtype=torch.bfloat16)
        b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
        expected = torch.matmul(a, b)
        best = None
        for name, gemm in entries.items():
            if name.startswith("few") != (m <= 64):
                continue
            for split in splits:
                forced(gemm, split)
                out = gemm(a, b)
                err = ((out.float() - expected.float()).norm() / expected.float().norm()).item()
                library = timed(lambda: torch.matmul(a, b), args.reps, flush)
                ours = timed(lambda: gemm(a, b), args.reps, flush)
                again = timed(lambda: torch.matmul(a, b), args.reps, flush)
                library = (library + again) / 2  # cuBLAS before and after, against drift
                speedup = library / ours
                row = {"case": case.name, "config": name, "splits": split, "ms": ours, "library_ms": library,
                       "speedup": speedup, "rel_err": err}
                rows.append(row)
                print(f"{case.name:20s} {name:16s} splits {split}: {speedup:6.3f}x  ({ours * 1e3:7.1f} us, "
                      f"cublas {row['library_ms'] * 1e3:7.1f} us, err {err:.1e})", flush=True)
                if best is None or speedup > best["speedup"]:
                    best = row
        print(f"BEST {best['case']:20s} {best['config']} splits {best['splits']}: {best['speedup']:.3f}x", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
