"""ModelNew for matmul_randn.py (C = A @ B) whose operands are rounded before an fp32 (IEEE) dot: DROPPED_BITS
mantissa bits dropped, round to nearest. 0 is plain fp32; 13 keeps TF32's 10 bits (what a tensor core's TF32 mode
reads); 16 keeps bf16's 7. The precision-parity tests set it."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

DROPPED_BITS = 0
BLOCK = 32


@triton.jit
def _rounded(x, DROPPED: tl.constexpr):
    if DROPPED > 0:
        bits = x.to(tl.int32, bitcast=True)
        x = ((bits + (1 << (DROPPED - 1))) & (-(1 << DROPPED))).to(tl.float32, bitcast=True)
    return x


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK: tl.constexpr, DROPPED: tl.constexpr):
    rm = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rn = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    rk = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k0 in range(0, K, BLOCK):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(_rounded(a, DROPPED), _rounded(b, DROPPED), acc, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        A, B = A.contiguous(), B.contiguous()
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), dtype=A.dtype, device=A.device)
        _matmul[(triton.cdiv(M, BLOCK), triton.cdiv(N, BLOCK))](A, B, C, M, N, K, BLOCK=BLOCK, DROPPED=DROPPED_BITS)
        return C
