"""Where a packaged kernel's block spends its time, on a GPU: the Llama-style block of tests/package/test_gpu.py
(B=2, S=2048, hidden 4096, 32/8 heads of 128, MLP 14336, bf16), unpatched and under patch() of the packaged bests
of the shipped CUDA attention and GEMM runs (the GEMM package also with today's cuda_wgmma seed as its kernel, as
the test does), each profiled over a few eager forwards: torch.profiler's top ops by GPU time and by CPU time, the
median forward time, and the packages' call counters. `--model 1b --seq S`: instead, Llama-3.2-1B's block (B=1,
qkv and gate+up fused) under the packages of the two runs evolved for its shapes (tests/package/test_gpu_model.py),
attention alone and with GEMM.

    python scripts/package_block_profile.py [--rows 15] [--forwards 5] [--model 1b --seq 1024]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "package"))

import test_gpu  # noqa: E402  (the block, the packages and their patching, as the GPU test builds them)
import test_gpu_model  # noqa: E402


def table(prof, key: str, rows: int) -> str:
    events = prof.key_averages()
    for sort in (f"self_{key}_time_total", "self_cuda_time_total" if key == "device" else None):
        if sort is None:
            break
        try:
            return events.table(sort_by=sort, row_limit=rows)
        except (AttributeError, KeyError, ValueError):
            continue
    return events.table(row_limit=rows)


def profiled(name: str, forward, x, rows: int, forwards: int) -> None:
    for _ in range(3):
        forward(x)
    torch.cuda.synchronize()
    ms = test_gpu.forward_ms(forward, x)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(forwards):
            forward(x)
        torch.cuda.synchronize()
    print(f"\n=== {name}: median forward {ms:.3f} ms (CUDA events, 10 forwards); profiled over {forwards}")
    print("--- top ops by GPU time")
    print(table(prof, "device", rows))
    print("--- top ops by CPU time")
    print(table(prof, "cpu", rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=15)
    parser.add_argument("--forwards", type=int, default=5)
    parser.add_argument("--model", choices=("8b", "1b"), default="8b")
    parser.add_argument("--seq", type=int, default=1024, help="tokens, with --model 1b")
    args = parser.parse_args()
    if args.model == "1b":
        return model_1b(args)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; block B={test_gpu.BATCH} S={test_gpu.SEQ}, "
          f"eager, no grad")
    with tempfile.TemporaryDirectory() as root, torch.no_grad():
        packages = test_gpu.build_packages(Path(root))
        model = test_gpu.block()
        x = torch.randn(test_gpu.BATCH, test_gpu.SEQ, test_gpu.HIDDEN, device="cuda", dtype=torch.bfloat16)
        profiled("unpatched (cuDNN SDPA, cuBLAS)", model, x, args.rows, args.forwards)
        for gemm in ("gemm", "gemm_seed"):
            chosen = (packages["attention"], packages[gemm])
            with test_gpu.patched(chosen):
                label = "the shipped run's best" if gemm == "gemm" else "today's cuda_wgmma seed"
                profiled(f"patched: attention package, GEMM package with {label}", model, x, args.rows,
                         args.forwards)
                for package in chosen:
                    print(f"{package.__name__}: {test_gpu.report(package)}")


def model_1b(args) -> None:
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; Llama-3.2-1B block B=1 S={args.seq}, eager, "
          "no grad")
    with tempfile.TemporaryDirectory() as root, torch.no_grad():
        packages = test_gpu_model.build_model_packages(Path(root))
        model = test_gpu.block(test_gpu_model.LLAMA_1B, 1, args.seq, fused=True)
        x = torch.randn(1, args.seq, test_gpu_model.LLAMA_1B.hidden, device="cuda", dtype=torch.bfloat16)
        profiled("unpatched (SDPA, cuBLAS)", model, x, args.rows, args.forwards)
        for label, chosen in (("attention", (packages["attention"],)),
                              ("attention+gemm", (packages["attention"], packages["gemm"]))):
            with test_gpu.patched(chosen):
                profiled(f"patched: {label}", model, x, args.rows, args.forwards)
                for package in chosen:
                    print(f"{package.__name__}: {test_gpu.report(package)}")


if __name__ == "__main__":
    main()
