"""A GEMM that asks for a terabyte of GPU memory first, more than any device has, as a candidate with a runaway
workspace would."""

import torch

WORKSPACE_BYTES = 1 << 40


def gemm(a, b):
    workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=a.device)
    c = torch.zeros((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    c[:1, :1] = workspace[:1].to(a.dtype)
    return c
