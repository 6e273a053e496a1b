"""A Triton kernel that spins forever on a flag nobody sets."""

import torch
import triton
import triton.language as tl


@triton.jit
def _spin(flag_ptr, c_ptr):
    while tl.load(flag_ptr) == 0:
        tl.store(c_ptr, 0.0)


def gemm(a, b):
    c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    flag = torch.zeros(1, dtype=torch.int32, device=a.device)
    _spin[(1,)](flag, c)
    return c
