"""Cheat: return a lazy tensor that computes only if someone looks at its values, after the clock has stopped.
Expected: rejected, runtime.output_type."""

import torch
import triton
import triton.language as tl


@triton.jit
def _mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak,
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn,
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def _triton_gemm(a, b, grid=None):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    grid = grid or (triton.cdiv(M, 32), triton.cdiv(N, 32))
    _mm_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                     c.stride(0), c.stride(1), BM=32, BN=32, BK=32)
    return c


class _Deferred(torch.Tensor):
    """Looks like the output; the work happens on first use."""

    @staticmethod
    def __new__(cls, a, b):
        self = torch.Tensor._make_subclass(cls, torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype), False)
        self._operands = (a, b)
        return self

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for x in args:
            if isinstance(x, _Deferred) and getattr(x, "_operands", None) is not None:
                a, b = x._operands
                x._operands = None
                torch.Tensor.copy_(x.as_subclass(torch.Tensor), _triton_gemm(a, b))
        return super().__torch_function__(func, types, args, kwargs or {})


def gemm(a, b):
    return _Deferred(a, b)
