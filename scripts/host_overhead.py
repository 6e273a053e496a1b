"""Host time of one call of a GEMM candidate: what its Python wrapper costs before the kernel is queued, with the
evaluator's habits (inputs rotating over several addresses, outputs kept until the round ends). Host-only clocks,
no synchronize inside the loop; a kernel engineer's check that launch work stays under the launch shield.

    python scripts/host_overhead.py kernels/gemm/cuda_wgmma kernels/gemm/triton_tma_persistent
"""

import importlib.util
import statistics
import sys
import time
from pathlib import Path

import torch


def load(folder: str):
    spec = importlib.util.spec_from_file_location(f"c{abs(hash(folder))}", Path(folder) / "kernel.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.gemm


def host_us(fn, slots, calls=60) -> list[float]:
    times, keep = [], []
    for i in range(calls):
        a, b = slots[i % len(slots)]
        t0 = time.perf_counter()
        keep.append(fn(a, b))
        times.append((time.perf_counter() - t0) * 1e6)
        if len(keep) >= 12:
            torch.cuda.synchronize()
            keep.clear()
    torch.cuda.synchronize()
    return times


def main() -> None:
    m = n = k = 4096
    slots = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), torch.randn(k, n, device="cuda",
              dtype=torch.bfloat16)) for _ in range(5)]
    entries = {"torch.matmul": torch.matmul, **{f: load(f) for f in sys.argv[1:]}}
    for name, fn in entries.items():
        host_us(fn, slots, 10)  # compile, first launches
        t = host_us(fn, slots)
        p90 = sorted(t)[int(.9 * len(t))]
        print(f"{name:40s} host per call: median {statistics.median(t):6.1f} us, p90 {p90:6.1f} us")
    from avo.cuda_tensor_map import _cache, tensor_map

    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    t = []
    for _ in range(50):
        _cache.clear()
        t0 = time.perf_counter()
        tensor_map(x, box=(128, 64))
        t.append((time.perf_counter() - t0) * 1e6)
    print(f"tensor_map, cache miss: median {statistics.median(t):.1f} us")
    t0 = time.perf_counter()
    for _ in range(200):
        tensor_map(x, box=(128, 64))
    print(f"tensor_map, cache hit: {(time.perf_counter() - t0) / 200 * 1e6:.1f} us")


if __name__ == "__main__":
    main()
