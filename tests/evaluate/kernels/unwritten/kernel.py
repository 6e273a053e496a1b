"""A candidate that returns the output buffer without ever writing it."""

import torch


def gemm(a, b):
    return torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
