"""Cheating twin of examples/kernelbench/solutions/12_Gemm_Multiply_LeakyReLU: the GEMM is nn.Linear's own (the
holder is called in forward); only the multiply and LeakyReLU are a Triton kernel. Rejected under ops=strict
(static.library_call), allowed under ops=partial."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024  # avo: tune 512 1024 2048


@triton.jit
def _scale_leaky(x_ptr, y_ptr, n, multiplier, slope, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    x = tl.load(x_ptr + offs, mask=inside, other=0.0).to(tl.float32) * multiplier
    tl.store(y_ptr + offs, tl.where(x >= 0, x, x * slope).to(y_ptr.dtype.element_ty), mask=inside)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.leaky_relu = nn.LeakyReLU(negative_slope)

    def forward(self, x):
        h = self.gemm(x).contiguous()
        y = torch.empty_like(h)
        n = h.numel()
        _scale_leaky[(triton.cdiv(n, BLOCK),)](h, y, n, self.multiplier, self.leaky_relu.negative_slope, BLOCK=BLOCK)
        return y
