"""The library's first call on each case of a suite, timed in a fresh process: the work a worker's set-up does for it
(cuDNN builds an execution plan per shape and has the driver compile its kernels from PTX, which the driver's JIT
cache, CUDA_CACHE_PATH, keeps across processes).

    CUDA_CACHE_PATH=/tmp/cc python3 scripts/library_first_calls.py attention        # twice: cold, then warm
    CUDA_CACHE_DISABLE=1 python3 scripts/library_first_calls.py attention
    CUDA_CACHE_PATH=/tmp/cc python3 scripts/library_first_calls.py attention --hard-exit   # os._exit, as a worker
    CUDA_CACHE_PATH=/tmp/cc python3 scripts/library_first_calls.py attention --check-first 1   # a worker's order

`--check-first N` calls the library on the first N check cases before the suite, as a worker's set-up does (all of
them in the first worker, one where an earlier worker passed on the reference's ops). Prints the seconds of all first
calls together, of the second calls (the plans and kernels in place), and how many files the driver's JIT cache
gained.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def cache_files() -> int:
    root = os.environ.get("CUDA_CACHE_PATH")
    return sum(1 for p in Path(root).rglob("*") if p.is_file()) if root and Path(root).is_dir() else 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("task", help="attention or gemm")
    parser.add_argument("--suite", default="bench")
    parser.add_argument("--check-first", type=int, default=0, metavar="N",
                        help="the library on the first N check cases before the suite")
    parser.add_argument("--check-after", type=int, default=0, metavar="N",
                        help="the library on the first N check cases after the suite")
    parser.add_argument("--hard-exit", action="store_true", help="end with os._exit(0), as an evaluation worker does")
    args = parser.parse_args()

    import torch

    from avo import tasks

    task = tasks.load(args.task)
    files = cache_files()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()

    def timed(inputs) -> float:
        start = time.perf_counter()
        task.library(*inputs)
        torch.cuda.synchronize()
        return time.perf_counter() - start

    def checks(count: int) -> float:
        return sum(timed(task.make_inputs(case, 7 + i, "cuda")) for i, case in enumerate(task.cases("check")[:count]))

    before = checks(args.check_first)
    first = second = 0.0
    cases = task.cases(args.suite)
    for i, case in enumerate(cases):
        inputs = task.make_inputs(case, 5 + i, "cuda")
        torch.cuda.synchronize()
        first += timed(inputs)
        second += timed(inputs)
        del inputs
    after = checks(args.check_after)
    cache = {name: os.environ.get(name) for name in ("CUDA_CACHE_PATH", "CUDA_CACHE_DISABLE")}
    print(f"{len(cases)} cases: first calls {first:.2f} s, second calls {second:.3f} s; check cases before "
          f"{before:.2f} s, after {after:.2f} s; JIT cache files {files} -> {cache_files()} ({cache})", flush=True)
    if args.hard_exit:
        os._exit(0)


if __name__ == "__main__":
    main()
