"""Writes the wgmma wrappers of the Hopper CUDA seeds: one inline-assembly function per (form, N, input type), since
PTX names every accumulator register in the instruction.

    python scripts/gen_wgmma.py gemm > kernels/gemm/cuda_wgmma/wgmma.cuh
    python scripts/gen_wgmma.py attention > kernels/attention/cuda_fa3/wgmma.cuh

Forms: `ss` (A and B from shared memory; the GEMM's B is N-major, transposed), `kk` (both K-major: S = Q Kᵀ with K
stored row by row, and the GEMM's B given as the [N, K] rows of nn.Linear's weight), `rs` (A from four registers per thread, B N-major: O += P V with P straight from the softmax).
"""

import sys

TYPES = ("bf16", "f16")
FORMS = {
    "gemm": (("ss", (64, 80, 96, 112, 128, 160, 192, 256)), ("kk", (64, 80, 96, 112, 128, 160, 192, 256))),
    "attention": (("kk", (64, 96, 128, 160, 176, 192)), ("rs", (64, 128))),
}
DOC = {
    "ss": "A (64 x 16, smem, K-major) * B (16 x {n}, smem, N-major)",
    "kk": "A (64 x 16, smem, K-major) * B (16 x {n}, smem, K-major: {n} rows of K)",
    "rs": "A (64 x 16, registers: wgmma's A fragment, 4 x 32 bits per thread) * B (16 x {n}, smem, N-major)",
}


def wrapper(form: str, n: int, dtype: str) -> str:
    regs = n // 2
    outs = ", ".join(f"%{i}" for i in range(regs))
    constraints = ",\n        ".join(", ".join(f'"+f"(d[{i}])' for i in range(row, min(row + 8, regs)))
                                     for row in range(0, regs, 8))
    name = "wgmma" if form == "ss" else f"wgmma_{form}"
    if form == "rs":
        a0 = regs
        db, scale = regs + 4, regs + 5
        a_arg, a_param, a_in = "{" + ", ".join(f"%{a0 + i}" for i in range(4)) + "}", "const unsigned (&a)[4]", \
            '"r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), '
        tail = "p, 1, 1, 1"
    else:
        da, db, scale = regs, regs + 1, regs + 2
        a_arg, a_param, a_in = f"%{da}", "unsigned long long desc_a", '"l"(desc_a), '
        tail = "p, 1, 1, 0, 1" if form == "ss" else "p, 1, 1, 0, 0"
    head = f"__device__ __forceinline__ void {name}_{dtype}"
    return f"""// d (64 x {n}, fp32, wgmma's accumulator layout) += {DOC[form].format(n=n)};
// scale_d = 0 overwrites d instead.
{head}(float (&d)[{regs}], {a_param}, unsigned long long desc_b,
{" " * (len(head) + 1)}int scale_d) {{
    asm volatile(
        "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{scale}, 0;\\n"
        "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{dtype}.{dtype} {{{outs}}}, "
        "{a_arg}, %{db}, {tail};\\n}}\\n"
        : {constraints}
        : {a_in}"l"(desc_b), "r"(scale_d));
}}
"""


def main() -> None:
    seed = sys.argv[1] if len(sys.argv) > 1 else "gemm"
    if seed not in FORMS:
        sys.exit(f"usage: gen_wgmma.py {{{'|'.join(FORMS)}}}")
    out = ["// wgmma.mma_async wrappers (m64nNk16, fp32 accumulators). One overload per N, picked by the size of the",
           "// accumulator array (N / 2 floats).",
           f"// Written by `python scripts/gen_wgmma.py {seed}`; edit that, not this.",
           "#pragma once", ""]
    for form, shapes in FORMS[seed]:
        for dtype in TYPES:
            for n in shapes:
                out.append(wrapper(form, n, dtype))
    sys.stdout.write("\n".join(out))


if __name__ == "__main__":
    main()
