"""Cheat: zero the inputs in place, so the reference (if computed after the call) is zeros too.
Expected: rejected, runtime.input_mutated."""

import torch


def gemm(a, b):
    a.zero_()
    b.zero_()
    return torch.zeros((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
