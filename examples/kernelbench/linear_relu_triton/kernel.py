"""ModelNew for examples/kernelbench/linear_relu.py: relu(x @ Wᵀ + b) as one Triton kernel.

One program per output tile; bias and ReLU are applied to the fp32 accumulator before the single store, so the
unfused library path's extra pass over the output (write, read, write again for the ReLU) is gone. `self.linear`
stays Model's nn.Linear, a holder of the weight ([out, in]) and bias, so avo copies Model's parameters in by name;
forward reads them and never calls the layer. Masks make any shape correct; the knobs are the usual GEMM tile,
pipeline and tile-order choices.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_M = 64  # avo: tune 64 128
BLOCK_N = 64  # avo: tune 64 128 256
BLOCK_K = 32  # avo: tune 32 64
GROUP_M = 1  # avo: tune 1 8
NUM_WARPS = 4  # avo: tune 4 8
NUM_STAGES = 2  # avo: tune 2 3 4


@triton.jit
def _linear_relu(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    # Grouped order: GROUP_M row tiles sweep the columns together, so their x rows and W columns stay in L2.
    group = pid // (GROUP_M * tiles_n)
    first_m = group * GROUP_M
    rows_in_group = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * tiles_n)) % rows_in_group
    pid_n = (pid % (GROUP_M * tiles_n)) // rows_in_group

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + ks
        x = tl.load(x_ptr + rows[:, None] * K + kk[None, :], mask=(rows[:, None] < M) & (kk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + cols[None, :] * K + kk[:, None], mask=(cols[None, :] < N) & (kk[:, None] < K), other=0.0)
        acc = tl.dot(x, w, acc)
    bias = tl.load(b_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    y = tl.maximum(acc + bias[None, :], 0.0)
    tl.store(y_ptr + rows[:, None] * N + cols[None, :], y.to(y_ptr.dtype.element_ty),
             mask=(rows[:, None] < M) & (cols[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = x.contiguous()
        w, b = self.linear.weight.contiguous(), self.linear.bias
        M, K = x.shape
        N = w.shape[0]
        y = torch.empty((M, N), dtype=x.dtype, device=x.device)
        grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
        _linear_relu[grid](x, w, b, y, M, N, K, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,
                           num_warps=NUM_WARPS, num_stages=NUM_STAGES)
        return y
