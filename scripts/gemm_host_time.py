"""Host time per call of a GEMM wrapper against its GPU time, on a GPU: how long the Python side takes to queue one call
(many calls queued back to back without a synchronize, behind a GPU spin so the queue never drains, divided by
their number) next to what the kernel takes on the GPU (CUDA events around the same calls). A wrapper whose host
time reaches its GPU time starves the GPU in a model's forward.

    python scripts/gemm_host_time.py [KERNEL_DIR ...]    (default: kernels/gemm/cuda_wgmma)
    python scripts/gemm_host_time.py --profile [KERNEL_DIR]   (where one wrapper's host time goes: cProfile)
    python scripts/gemm_host_time.py --pieces [KERNEL_DIR]    (the same, each step of a cuda_wgmma call timed alone)
    AVO_HOST_SHAPES=16384x57344x8192,64x8192x8192 python scripts/gemm_host_time.py    (other shapes than SHAPES)
    AVO_HOST_SHAPES=... python scripts/gemm_host_time.py --evaluator [KERNEL_DIR]   (one call at a time, as the
        evaluator's warm-up calls: fresh inputs, L2 read, with and without a GPU spin before; then a cProfile)

Each shape runs with b row-major ([K, N]) and as nn.Linear passes it (weight.t() of a contiguous [N, K]).
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from scripts.gemm_config_sweep import _shapes  # noqa: E402

SHAPES = [(4096, 4096, 4096), (4096, 1024, 4096), (4096, 14336, 4096), (64, 4096, 4096), (16, 4096, 14336)]
if os.environ.get("AVO_HOST_SHAPES"):
    SHAPES = [shape[1:] for shape in _shapes(os.environ["AVO_HOST_SHAPES"])]
CALLS = 50


def load(folder: Path, name: str = "gemm"):
    """The function `name` of the kernel.py in `folder`, imported as the evaluator imports it."""
    spec = importlib.util.spec_from_file_location(f"kernel_{abs(hash(str(folder)))}", folder / "kernel.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(folder))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(folder))
    return getattr(module, name)


def per_call_us(fn, calls: int = 400) -> float:
    """Host µs per call of fn(), median of 5 rounds, behind a GPU spin (the launch queue stays short of full)."""
    rounds = []
    for _ in range(5):
        torch.cuda._sleep(20_000_000)
        begin = time.perf_counter()
        for _ in range(calls):
            fn()
        rounds.append((time.perf_counter() - begin) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(rounds)


def measure(fn, a, b) -> tuple[float, float]:
    """(host µs per call, GPU µs per call), medians of 5 rounds of CALLS calls."""
    for _ in range(3):
        fn(a, b)
    torch.cuda.synchronize()
    host, gpu = [], []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(5):
        torch.cuda._sleep(50_000_000)  # keeps the GPU busy while the host queues: host time alone is clocked
        begin = time.perf_counter()
        for _ in range(CALLS):
            fn(a, b)
        host.append((time.perf_counter() - begin) / CALLS * 1e6)
        torch.cuda.synchronize()
        start.record()
        for _ in range(CALLS):
            fn(a, b)
        end.record()
        torch.cuda.synchronize()
        gpu.append(start.elapsed_time(end) / CALLS * 1e3)
    return statistics.median(host), statistics.median(gpu)


def profile(fn, calls: int = 300) -> None:
    """cProfile of `calls` calls of one shape (4096x1024x4096, b as nn.Linear passes it), behind a GPU spin: the
    functions the wrapper's host time goes to, by their own time."""
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(1024, 4096, device="cuda", dtype=torch.bfloat16).t()
    for _ in range(3):
        fn(a, b)
    torch.cuda.synchronize()
    profiled(lambda: fn(a, b), calls, rows=30)


def profiled(call, calls: int = 300, rows: int = 25) -> None:
    """cProfile of `calls` calls of call(), behind a GPU spin (only the host is clocked), the top `rows` functions by
    their own time."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    torch.cuda._sleep(200_000_000)
    profiler.enable()
    for _ in range(calls):
        call()
    profiler.disable()
    torch.cuda.synchronize()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(rows)


def pieces(fn) -> None:
    """Each step of one cuda_wgmma call (4096x1024x4096, b as nn.Linear passes it) timed alone, µs per call."""
    from avo.cuda import current_stream, tensor_map
    from avo.cuda_launch import _kernel_arg
    from avo.cuda_tensor_map import _encode

    g = fn.__globals__
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(1024, 4096, device="cuda", dtype=torch.bfloat16).t()
    M, K, N = 4096, 4096, 1024
    c = fn(a, b)
    planned = g["_PLANS"][M, N, K, g["_sm_count"](a.device)]
    build = planned.build
    module, name = build.k_major(), g["_KERNELS"][a.dtype]
    map_a = tensor_map(a, box=(build.block_m // build.cluster_n, g["BLOCK_K"]))
    maps = (map_a, map_a, tensor_map(b.t(), box=(64, g["BLOCK_K"])), tensor_map(c, box=(64, 64)))  # M: no edge row
    args = (*maps, c, M, N, K, c, c, planned.whole, planned.splits, planned.stream, planned.lanes)
    grid = min(planned.units, g["_sm_count"](a.device) // build.cluster) * build.cluster
    launch = module.launcher(name, grid, build.threads, args, shared_mem=build.smem)
    key = next(iter(g["_LAUNCHES"].keys()))  # the call above's
    steps = {
        "gemm(a, b)": lambda: fn(a, b),
        "torch.matmul(a, b)": lambda: torch.matmul(a, b),
        "torch.empty(M, N)": lambda: torch.empty((M, N), dtype=a.dtype, device=a.device),
        "3 tensor_map lookups": lambda: (tensor_map(a, box=(build.block_m // build.cluster_n, 64)),
                                         tensor_map(b.t(), box=(64, 64)),
                                         tensor_map(c, box=(64, 64))),
        "14 _kernel_arg": lambda: tuple(_kernel_arg(x) for x in args),
        "module.launch (kept)": lambda: module.launch(name, grid, build.threads, args, shared_mem=build.smem),
        "module.launcher (prepare)": lambda: module.launcher(name, grid, build.threads, args, shared_mem=build.smem),
        "prepared launch()": launch,
        "current_stream": lambda: current_stream(0),
        "launch lookup": lambda: g["_LAUNCHES"].get(key, None),
        "1 tensor map encoded (a miss)": lambda: _encode(c, (64, 64), 128),
    }
    for label, step in steps.items():
        print(f"{label:32s} {per_call_us(step):8.1f} us")


def evaluator_regime(fn, calls: int = 30) -> None:
    """Host µs of one call at a time, as the evaluator's warm-up clocks it (avo.evaluate.worker.timing): fresh
    inputs (its InputRotation), L2 read (L2Flush), no spin or a 1 ms one before the call (LaunchShield), the call, a
    synchronize; the wrapper against torch.matmul, then a cProfile of the wrapper's calls behind the spin."""
    import cProfile
    import pstats

    from avo.evaluate.worker.timing import InputRotation, L2Flush, LaunchShield

    flush, shields = L2Flush(50 << 20), (LaunchShield(0), LaunchShield(1000))
    for m, n, k in SHAPES:
        rotation = InputRotation([(torch.randn(m, k, device="cuda", dtype=torch.bfloat16),
                                   torch.randn(k, n, device="cuda", dtype=torch.bfloat16)) for _ in range(2)], seed=7)
        for shield in shields:
            for name, call in (("wrapper", fn), ("torch.matmul", torch.matmul)):
                host = []
                for i in range(calls):
                    a, b = rotation(i)
                    flush()
                    shield()
                    begin = time.perf_counter()
                    out = call(a, b)
                    host.append((time.perf_counter() - begin) * 1e6)
                    torch.cuda.synchronize()
                    del out
                host = host[1:]
                print(f"{m}x{n}x{k} spin {shield.us:6.0f} us {name:12s} host us median "
                      f"{statistics.median(host):7.1f} min {min(host):7.1f} max {max(host):7.1f}", flush=True)
        profiler = cProfile.Profile()
        for i in range(20):
            a, b = rotation(i)
            flush()
            shields[1]()
            profiler.enable()
            out = fn(a, b)
            profiler.disable()
            torch.cuda.synchronize()
            del out
        pstats.Stats(profiler).sort_stats("tottime").print_stats(8)
        del rotation
        torch.cuda.empty_cache()


def main() -> None:
    modes = {"--evaluator": evaluator_regime, "--pieces": pieces, "--profile": profile}
    if sys.argv[1:2] and sys.argv[1] in modes:
        seed = Path(sys.argv[2]).resolve() if sys.argv[2:] else ROOT / "kernels" / "gemm" / "cuda_wgmma"
        modes[sys.argv[1]](load(seed))
        return
    folders = [Path(f).resolve() for f in sys.argv[1:]] or [ROOT / "kernels" / "gemm" / "cuda_wgmma"]
    entries = {"torch.matmul": torch.matmul, **{str(f.relative_to(ROOT) if f.is_relative_to(ROOT) else f): load(f)
                                                 for f in folders}}
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, bf16; host = queueing time per call, GPU = "
          f"kernel time per call (medians of 5 x {CALLS} calls)")
    print(f"{'wrapper':32s} {'M x N x K':>18s} {'b':>10s} {'host us':>8s} {'GPU us':>8s} {'host/GPU':>8s}")
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        weight = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        for layout, b in (("rows", weight.t().contiguous()), ("weight.t", weight.t())):
            for name, fn in entries.items():
                host, gpu = measure(fn, a, b)
                print(f"{name:32s} {f'{m}x{n}x{k}':>18s} {layout:>10s} {host:8.1f} {gpu:8.1f} {host / gpu:8.2f}")


if __name__ == "__main__":
    main()
