"""Buggy twin of tests/tasks/kernelbench/kb_problems/candidates/relu_honest: its masks removed, so the last block
reads and writes past the tensor wherever the element count is not a multiple of BLOCK. The interpreter's sizes of
19_ReLU (4096 x 393216) were 128 x 96 and 96 x 72, multiples of 256 both, and it passed there."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 256


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0))


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK)
        return y
