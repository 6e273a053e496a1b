"""ModelNew for KernelBench level 1, 25_Swish: x * sigmoid(x) in one pass.

Eager PyTorch runs the chain as two kernels (sigmoid, then multiply), reading x twice and writing an intermediate;
here each element is read once and written once, computed as x / (1 + exp(-x)) in fp32. Offsets are 64-bit: the
file's input holds 1.6 billion elements.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 4096  # avo: tune 1024 2048 4096 8192
NUM_WARPS = 8  # avo: tune 4 8 16


@triton.jit
def _swish(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    x = tl.load(x_ptr + offs, mask=inside, other=0.0).to(tl.float32)
    y = x / (1.0 + tl.exp(-x))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=inside)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _swish[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=NUM_WARPS)
        return y
