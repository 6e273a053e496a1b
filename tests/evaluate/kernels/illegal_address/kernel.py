"""A Triton GEMM that writes a terabyte past its output: on a GPU, a CUDA illegal address (the context is lost for
the rest of the process). Only the evaluator's own fresh process per evaluation keeps the next one healthy."""

import torch
import triton
import triton.language as tl

BLOCK = 64
WILD = 1 << 40


@triton.jit
def _wild_store(c_ptr, M, N, s_cm, s_cn, WILD: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    zero = tl.zeros([BLOCK, BLOCK], dtype=tl.float32)
    tl.store(c_ptr + WILD + rows[:, None] * s_cm + cols[None, :] * s_cn, zero.to(c_ptr.dtype.element_ty),
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def gemm(a, b):
    M, N = a.shape[0], b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    _wild_store[(triton.cdiv(M, BLOCK), triton.cdiv(N, BLOCK))](c, M, N, c.stride(0), c.stride(1), WILD=WILD,
                                                                BLOCK=BLOCK)
    return c
