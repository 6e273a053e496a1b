"""ModelNew for KernelBench level 2, 9_Matmul_Subtract_Multiply_ReLU: relu((x @ Wᵀ + b - s) * m) as one GEMM.

`self.linear` stays an nn.Linear, so Model's weight and bias copy in by name; forward only reads them. The bias,
subtraction, multiplication and ReLU are applied to the fp32 accumulator before the one store, where eager PyTorch
writes and re-reads the [batch, out] output four times.

The operands are fp32 and the dot is "tf32x3" (three TF32 tensor-core products, fp32-class error), not plain TF32:
the threshold keeps only the tail of x W^T, where TF32's 8e-4 relative error becomes 5e-3 to 2.4e-2 of the output
(H200: 0.0238, against the fp32 tolerance of 1e-3). "ieee" is exact too, on the FMA units instead.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_M = 128  # avo: tune 64 128
BLOCK_N = 128  # avo: tune 64 128 256
BLOCK_K = 32  # avo: tune 32 64
GROUP_M = 8  # avo: tune 1 8
NUM_WARPS = 8  # avo: tune 4 8
NUM_STAGES = 3  # avo: tune 2 3 4
PRECISION = "tf32x3"  # avo: tune tf32x3 ieee


@triton.jit
def _linear_sub_mul_relu(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, subtract, multiply,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                         PRECISION: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + ks
        x = tl.load(x_ptr + rows[:, None] * K + kk[None, :], mask=(rows[:, None] < M) & (kk[None, :] < K), other=0.0)
        # W is [out, in]: its tile is read transposed, [BLOCK_K, BLOCK_N].
        w = tl.load(w_ptr + cols[None, :] * K + kk[:, None], mask=(cols[None, :] < N) & (kk[:, None] < K), other=0.0)
        acc = tl.dot(x, w, acc, input_precision=PRECISION)
    bias = tl.load(b_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    y = tl.maximum((acc + bias[None, :] - subtract) * multiply, 0.0)
    tl.store(y_ptr + rows[:, None] * N + cols[None, :], y.to(y_ptr.dtype.element_ty),
             mask=(rows[:, None] < M) & (cols[None, :] < N))


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
        grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
        _linear_sub_mul_relu[grid](x, w, self.linear.bias, y, M, N, K, self.subtract_value, self.multiply_value,
                                   BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,
                                   PRECISION=PRECISION, num_warps=NUM_WARPS, num_stages=NUM_STAGES)
        return y
