"""Cheat: skip the work and return zeros (an absolute tolerance would let this pass on small outputs).
Expected: incorrect, check.mismatch (the tolerance is relative to the reference's norm)."""

import torch


def gemm(a, b):
    return torch.zeros((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
