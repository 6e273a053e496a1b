"""Imprecise twin of examples/kernelbench/solutions/9_Matmul_Subtract_Multiply_ReLU as it first was: tl.dot on fp32
operands in TF32, which on the H200 drops the low 13 mantissa bits of each operand. The interpreter computes tl.dot in
full fp32, so the operands are truncated here by hand, as the GPU does.

On the problem's own U(0, 1) inputs every output is below the threshold (zero), so only inputs scaled past it show
the error: relu(1.5 (x W^T + b - 2)) keeps the tail of x W^T, and TF32's 8e-4 on it is several times the fp32
tolerance of 1e-3 there. The check suite's scaled cases must catch it, not only a timed call.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_M = 32
BLOCK_N = 32
BLOCK_K = 32
TF32_MASK = -8192
"""0xFFFFE000 as an int32: sign, exponent and the 10 mantissa bits TF32 keeps."""


@triton.jit
def _tf32(v, MASK: tl.constexpr):
    return (v.to(tl.int32, bitcast=True) & MASK).to(tl.float32, bitcast=True)


@triton.jit
def _linear_sub_mul_relu(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, subtract, multiply,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, MASK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + ks
        x = tl.load(x_ptr + rows[:, None] * K + kk[None, :], mask=(rows[:, None] < M) & (kk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + cols[None, :] * K + kk[:, None], mask=(cols[None, :] < N) & (kk[:, None] < K), other=0.0)
        acc = tl.dot(_tf32(x, MASK), _tf32(w, MASK), acc, input_precision="ieee")
    bias = tl.load(b_ptr + cols, mask=cols < N, other=0.0)
    y = tl.maximum((acc + bias[None, :] - subtract) * multiply, 0.0)
    tl.store(y_ptr + rows[:, None] * N + cols[None, :], y, mask=(rows[:, None] < M) & (cols[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, subtract_value, multiply_value):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.subtract_value = subtract_value
        self.multiply_value = multiply_value

    def forward(self, x):
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        M, K = x.shape
        N = w.shape[0]
        y = torch.empty((M, N), dtype=x.dtype, device=x.device)
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
        _linear_sub_mul_relu[grid](x, w, self.linear.bias, y, M, N, K, self.subtract_value, self.multiply_value,
                                   BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, MASK=TF32_MASK)
        return y
