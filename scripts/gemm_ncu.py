"""One GEMM shape run by gemm/cuda_wgmma (its own plan, or with knobs set as the sweep sets them) and by torch.matmul
(cuBLAS), each called `--calls` times after a warm-up, for Nsight Compute to profile both side by side:

    ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \\
        -k 'regex:gemm_bf16|nvjet' --launch-skip 2 --launch-count 4 \\
        python3 scripts/gemm_ncu.py 128x3584x3584 --variant FEW_ROWS=128

(A warm-up call of each comes first, then the seed's calls, then cuBLAS's.) Prints the plan the seed took.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gemm_config_sweep import _variant, variant  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shape", help="MxNxK")
    parser.add_argument("--variant", default="", help="KNOB=VALUE,... (bucketed entries as KNOB@BUCKET)")
    parser.add_argument("--calls", type=int, default=2)
    args = parser.parse_args()
    M, N, K = map(int, args.shape.split("x"))
    settings = _variant(f"seed:{args.variant}")[1] if args.variant else {}  # the sweep's own --variant parser
    with tempfile.TemporaryDirectory() as root:
        gemm = variant("seed", settings, Path(root))
        a = torch.randn(M, K, dtype=torch.bfloat16, device="cuda")
        b = torch.randn(K, N, dtype=torch.bfloat16, device="cuda")
        gemm(a, b), torch.matmul(a, b)
        torch.cuda.synchronize()
        print("plan:", gemm.__globals__["plan"](M, N, K, torch.cuda.get_device_properties(0).multi_processor_count))
        for _ in range(args.calls):
            gemm(a, b)
        for _ in range(args.calls):
            torch.matmul(a, b)
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
