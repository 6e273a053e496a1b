"""Cheat: return a fresh, never-written buffer (whatever the allocator left there might match a previous output).
Expected: incorrect, check.unwritten."""

import torch


def gemm(a, b):
    return torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
