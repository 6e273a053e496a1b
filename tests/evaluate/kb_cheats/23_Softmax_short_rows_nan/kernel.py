"""Buggy twin of examples/kernelbench/solutions/23_Softmax: the first pass rescales every lane's running sum by
exp(old max - new max) without the guard for a lane that has seen only masked values, where that is exp(-inf + inf),
NaN. Every row shorter than the block is NaN; rows longer than one block (all of the file's sizes, and the check
suite's second) are right. A kernel with this bug scored correct on the H200 while the GPU check suite had only
those sizes."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 2048  # avo: tune 1024 2048 4096 8192
NUM_WARPS = 8  # avo: tune 4 8 16


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    lanes = tl.arange(0, BLOCK)
    run_max = tl.full([BLOCK], float("-inf"), tl.float32)
    run_sum = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + lanes
        inside = cols < n_cols
        x = tl.load(x_row + cols, mask=inside, other=float("-inf")).to(tl.float32)
        new_max = tl.maximum(run_max, x)
        scale = tl.exp(run_max - new_max)
        run_sum = run_sum * scale + tl.where(inside, tl.exp(x - new_max), 0.0)
        run_max = new_max
    row_max = tl.max(run_max, axis=0)
    row_sum = tl.sum(run_sum * tl.exp(run_max - row_max), axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + lanes
        inside = cols < n_cols
        x = tl.load(x_row + cols, mask=inside, other=0.0).to(tl.float32)
        y = tl.exp(x - row_max) / row_sum
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=inside)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        block = min(BLOCK, triton.next_power_of_2(cols))
        _softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=NUM_WARPS)
        return y
