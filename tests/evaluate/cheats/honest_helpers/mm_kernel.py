"""The Triton kernel and its launcher, imported by kernel.py from this folder."""

import triton
import triton.language as tl


@triton.jit
def _mm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn, B: tl.constexpr):
    rm = tl.program_id(0) * B + tl.arange(0, B)
    rn = tl.program_id(1) * B + tl.arange(0, B)
    rk = tl.arange(0, B)
    acc = tl.zeros([B, B], dtype=tl.float32)
    for k in range(0, K, B):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak,
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn,
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def launch(a, b, c, block):
    M, K = a.shape
    N = b.shape[1]
    grid = (triton.cdiv(M, block), triton.cdiv(N, block))
    _mm[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
              c.stride(0), c.stride(1), B=block)
