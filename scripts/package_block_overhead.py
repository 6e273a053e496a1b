"""Where a packaged block's forward spends its time under patch(), per variant (the library alone, the attention
package, both packages), eager and under torch.compile: the forward's milliseconds (CUDA events around one forward,
median of N), the host's microseconds to queue it (the call's return, the GPU idle before it), the GPU kernels one
forward runs (count and summed duration, torch.profiler); with --host-profile the host's busiest functions, with
--graphs the graphs and graph breaks Dynamo makes under the patches.

    python3 scripts/package_block_overhead.py --seq 1024 4096
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "package")]


def patched(packages):
    stack = ExitStack()
    for package in packages:
        stack.enter_context(package.patch())
    return stack


def forward_ms(fn, x, n: int) -> float:
    import torch

    times = []
    for _ in range(n):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(x)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def host_us(fn, x, n: int) -> float:
    import torch

    times = []
    for _ in range(n):
        torch.cuda.synchronize()
        began = time.perf_counter()
        fn(x)
        times.append((time.perf_counter() - began) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def kernels(fn, x) -> tuple[int, float]:
    """GPU kernels of one forward: how many, and their summed duration in µs."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(x)
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type.name == "CUDA"]
    return len(events), sum(e.device_time for e in events)


def host_profile(fn, x) -> None:
    """cProfile of 20 forwards: the functions with the most time of their own."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(20):
        fn(x)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, nargs="+", default=[1024])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--host-profile", action="store_true", help="the host's busiest functions in 20 forwards")
    parser.add_argument("--graphs", action="store_true", help="Dynamo's graphs and graph breaks under the patches")
    args = parser.parse_args()

    import torch
    from test_gpu import block
    from test_gpu_model import LLAMA_1B, build_model_packages

    packages = build_model_packages(Path(tempfile.mkdtemp(prefix="avo-block-")))
    variants = {"library": (), "attention": (packages["attention"],),
                "attention+gemm": (packages["attention"], packages["gemm"])}
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; Llama-3.2-1B block, bf16, B 1", flush=True)
    with torch.no_grad():
        for seq in args.seq:
            model = block(LLAMA_1B, 1, seq, fused=True)
            x = torch.randn(1, seq, LLAMA_1B.hidden, device="cuda", dtype=torch.bfloat16)
            for mode in ("eager", "compiled"):
                torch._dynamo.reset()
                for name, chosen in variants.items():
                    with patched(chosen):
                        fn = torch.compile(model) if mode == "compiled" else model
                        for _ in range(3):
                            fn(x)
                        ms, host = forward_ms(fn, x, args.calls), host_us(fn, x, args.calls)
                        count, busy = kernels(fn, x)
                        print(f"S {seq} {mode:8s} {name:15s} forward {ms:.3f} ms, host {host:7.1f} µs to queue, "
                              f"{count} kernels {busy:7.1f} µs", flush=True)
                        if args.host_profile:
                            host_profile(fn, x)
            if args.graphs:
                for name, chosen in variants.items():
                    torch._dynamo.reset()
                    with patched(chosen):
                        explained = torch._dynamo.explain(model)(x)
                    print(f"S {seq} {name}: graphs {explained.graph_count}, breaks {explained.graph_break_count}, "
                          f"{sum(len(g.graph.nodes) for g in explained.graphs)} nodes", flush=True)


if __name__ == "__main__":
    main()
