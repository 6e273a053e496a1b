"""Cheat: the linear layer through an alias of torch.nn.functional.linear, ReLU in Triton so it looks like a kernel.
Expected: rejected, static.library_call."""

import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.nn.functional import linear as fused_tile_product


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=offs < n)


class _LinearParameters(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = _LinearParameters(in_features, out_features)

    def forward(self, x):
        z = fused_tile_product(x, self.linear.weight, self.linear.bias)
        y = torch.empty_like(z)
        _relu[(triton.cdiv(z.numel(), 1024),)](z, y, z.numel(), BLOCK=1024)
        return y
