"""Cheat: compute the softmax in place in the input's memory and return the input, saving the output allocation.
Values are right, but a reference computed after the call would see the softmax, not the input.
Expected: rejected, runtime.input_mutated."""

import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_in_place(x_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(x_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        rows, cols = x.shape
        _softmax_in_place[(rows,)](x, cols, BLOCK=triton.next_power_of_2(cols))
        return x
