"""Where a packaged block's forward spends its time under patch(), per variant (the library alone, the attention
package, both packages), eager and under torch.compile: the forward's milliseconds (CUDA events around one forward,
median of N), the host's microseconds to queue it (the call's return, the GPU idle before it), the GPU kernels one
forward runs (count and summed duration, torch.profiler); with --host-profile the host's busiest functions, with
--graphs the graphs and graph breaks Dynamo makes under the patches; with --kernel-table each GPU kernel's count and
microseconds in one forward beside the library's, where they differ. --block 8b: the 8B-class block of
tests/package/test_gpu.py (B 2) under its packages, the GEMM package both as shipped and holding today's seed.

    python3 scripts/package_block_overhead.py --seq 1024 4096
    python3 scripts/package_block_overhead.py --block 8b --seq 2048 --kernel-table
    python3 scripts/package_block_overhead.py --seq 1024 16384 --modes graphs
    python3 scripts/package_block_overhead.py --seq 16384 --modes graphs --attention-seed
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


def kernel_table(fn, x) -> dict[str, list[float]]:
    """{kernel name: [count, summed µs]} of one forward."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(x)
        torch.cuda.synchronize()
    table: dict[str, list[float]] = {}
    for e in prof.events():
        if e.device_type.name == "CUDA":
            row = table.setdefault(e.name[:90], [0, 0.0])
            row[0] += 1
            row[1] += e.device_time
    return table


def print_table_difference(name: str, table: dict, library: dict) -> None:
    for kernel in sorted(set(table) | set(library), key=lambda k: -abs(table.get(k, [0, 0])[1]
                                                                       - library.get(k, [0, 0])[1])):
        ours, theirs = table.get(kernel, [0, 0.0]), library.get(kernel, [0, 0.0])
        if ours[0] != theirs[0] or abs(ours[1] - theirs[1]) > max(2.0, 0.03 * theirs[1]):
            print(f"    {name}: {ours[0]:3d} x {ours[1]:8.1f} µs, library {theirs[0]:3d} x {theirs[1]:8.1f} µs"
                  f"  {kernel}")


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
    parser.add_argument("--kernel-table", action="store_true", help="each variant's GPU kernels beside the library's")
    parser.add_argument("--block", choices=["1b", "8b"], default="1b")
    parser.add_argument("--modes", nargs="+", choices=["eager", "compiled", "graphs"], default=["eager", "compiled"],
                        help="graphs: torch.compile(mode='reduce-overhead'), the forward replayed as a CUDA graph")
    parser.add_argument("--attention-seed", action="store_true",
                        help="1b: also the attention package holding today's attention/cuda_fa3 seed as its kernel")
    parser.add_argument("--variants", nargs="+", help="only these variants (by name)")
    args = parser.parse_args()

    import torch
    from test_gpu import LLAMA_8B, block, build_packages
    from package_runs import ATTENTION_LLAMA, package_with_seed
    from test_gpu_model import LLAMA_1B, build_model_packages

    root = Path(tempfile.mkdtemp(prefix="avo-block-"))
    if args.block == "1b":
        packages, dims, batch, fused = build_model_packages(root), LLAMA_1B, 1, True
        variants = {"library": (), "attention": (packages["attention"],),
                    "attention+gemm": (packages["attention"], packages["gemm"])}
        if args.attention_seed:
            variants["attention_seed"] = (package_with_seed(root / "runs", ATTENTION_LLAMA, root, "attention_seed",
                                                            ROOT / "kernels" / "attention" / "cuda_fa3"),)
    else:
        packages, dims, batch, fused = build_packages(root), LLAMA_8B, 2, False
        variants = {"library": (), "attention": (packages["attention"],),
                    "attention+gemm": (packages["attention"], packages["gemm"]),
                    "attention+gemm_seed": (packages["attention"], packages["gemm_seed"])}
    variants = {name: chosen for name, chosen in variants.items() if not args.variants or name in args.variants}
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; {args.block} block, bf16, B {batch}", flush=True)
    with torch.no_grad():
        for seq in args.seq:
            model = block(dims, batch, seq, fused=fused)
            x = torch.randn(batch, seq, dims.hidden, device="cuda", dtype=torch.bfloat16)
            library_table, expected = None, model(x).float()
            for mode in args.modes:
                torch._dynamo.reset()
                for name, chosen in variants.items():
                    with patched(chosen):
                        fn = model if mode == "eager" else torch.compile(
                            model, mode="reduce-overhead" if mode == "graphs" else None)
                        for _ in range(3):
                            out = fn(x)
                        error = ((out.float() - expected).norm() / expected.norm()).item()
                        ms, host = forward_ms(fn, x, args.calls), host_us(fn, x, args.calls)
                        count, busy = kernels(fn, x)
                        print(f"S {seq} {mode:8s} {name:19s} forward {ms:.3f} ms, host {host:7.1f} µs to queue, "
                              f"{count} kernels {busy:7.1f} µs, rel err {error:.1e}", flush=True)
                        if args.kernel_table:
                            table = kernel_table(fn, x)
                            if name == "library":
                                library_table = table
                            elif library_table is not None:  # the library's variant first, unless left out
                                print_table_difference(name, table, library_table)
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
