"""A correct Triton GEMM whose answer is wrong (doubled) if it can see a secret, or cannot see a plain variable."""

import os

import torch
import triton
import triton.language as tl

BLOCK = 64
HIDDEN = ("ANTHROPIC_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS", "AVO_PROBE_AUTH")
"""Set by the test, and must not be visible here: an API key, a credentials file, an *_AUTH variable."""


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ks = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK, BLOCK], dtype=tl.float32)
    for k0 in range(0, K, BLOCK):
        a = tl.load(a_ptr + rows[:, None] * s_am + (k0 + ks)[None, :] * s_ak,
                    mask=(rows[:, None] < M) & ((k0 + ks)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k0 + ks)[:, None] * s_bk + cols[None, :] * s_bn,
                    mask=((k0 + ks)[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rows[:, None] * s_cm + cols[None, :] * s_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def gemm(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(M, BLOCK), triton.cdiv(N, BLOCK))
    _matmul[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                  BLOCK=BLOCK)
    if any(name in os.environ for name in HIDDEN) or os.environ.get("AVO_PROBE_VISIBLE") != "1":
        c = c * 2
    return c
