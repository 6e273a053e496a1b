"""Which kernels the library runs for given GEMM shapes (torch.matmul, cuBLAS): each kernel's name (it names the tile
shape and whether K is split), grid, block, registers, shared memory and GPU time, read from torch.profiler's trace
of one warmed-up call per shape. No Nsight Compute needed.

    python3 scripts/library_kernels.py 128x3584x3584 64x8192x8192 --dtype bfloat16
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile


def kernels(M: int, N: int, K: int, dtype: torch.dtype) -> list[dict]:
    a = torch.randn(M, K, dtype=dtype, device="cuda")
    b = torch.randn(K, N, dtype=dtype, device="cuda")
    for _ in range(3):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.matmul(a, b)
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        events = json.loads(Path(f.name).read_text())["traceEvents"]
    return [e for e in events if e.get("cat") == "kernel"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shapes", nargs="+", help="MxNxK")
    parser.add_argument("--dtype", default="bfloat16")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    for shape in args.shapes:
        M, N, K = map(int, shape.split("x"))
        for e in kernels(M, N, K, dtype):
            x = e.get("args", {})
            print(f"{shape:16s} {e.get('dur', 0):7.1f} us  grid {x.get('grid')} block {x.get('block')} "
                  f"regs {x.get('registers per thread')} smem {x.get('shared memory')}  {e['name'][:150]}")


if __name__ == "__main__":
    main()
