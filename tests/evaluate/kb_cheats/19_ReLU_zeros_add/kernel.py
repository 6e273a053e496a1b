"""Cheating twin: relu computed into a zeroed buffer with add_ and clamp_: allocation ops may not carry compute in.
None of these ops is the reference's own, so only --ops strict's rule that torch may only allocate, view and copy
rejects it (runtime.torch_op); --ops partial allows it."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=inside), mask=inside)


def through_kernel(x: torch.Tensor) -> torch.Tensor:
    """A kernel of its own, doing none of the work: the result torch computed, copied."""
    x = x.contiguous()
    out = torch.empty_like(x)
    _copy[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        out.add_(x).clamp_(min=0)
        return through_kernel(out)
