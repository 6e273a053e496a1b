"""Writes the wgmma wrappers of a Hopper CUDA seed: one inline-assembly function per (N, input type), since PTX
names every accumulator register in the instruction.

    python scripts/gen_wgmma.py > kernels/gemm/cuda_wgmma/wgmma.cuh
"""

import sys

TYPES = {"bf16": "bf16", "f16": "f16"}
SHAPES = (64, 128, 192, 256)


def wrapper(n: int, dtype: str) -> str:
    regs = n // 2
    outs = ", ".join(f"%{i}" for i in range(regs))
    constraints = ",\n        ".join(", ".join(f'"+f"(d[{i}])' for i in range(row, min(row + 8, regs)))
                                     for row in range(0, regs, 8))
    da, db, scale = regs, regs + 1, regs + 2
    return f"""// d (64 x {n}, fp32, wgmma's accumulator layout) += A (64 x 16, smem, K-major) * B (16 x {n}, smem, N-major);
// scale_d = 0 overwrites d instead.
__device__ __forceinline__ void wgmma_{dtype}(float (&d)[{regs}], unsigned long long desc_a, unsigned long long desc_b,
                                           int scale_d) {{
    asm volatile(
        "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{scale}, 0;\\n"
        "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{TYPES[dtype]}.{TYPES[dtype]} {{{outs}}}, "
        "%{da}, %{db}, p, 1, 1, 0, 1;\\n}}\\n"
        : {constraints}
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}}
"""


def main() -> None:
    out = ["// wgmma.mma_async wrappers (m64nNk16, fp32 accumulators, A and B from shared memory, B transposed: its",
           "// rows are K, N contiguous). One overload per N, picked by the size of the accumulator array (N / 2 floats).",
           "// Written by scripts/gen_wgmma.py; edit that, not this.",
           "#pragma once", ""]
    for dtype in TYPES:
        for n in SHAPES:
            out.append(wrapper(n, dtype))
    sys.stdout.write("\n".join(out))


if __name__ == "__main__":
    main()
