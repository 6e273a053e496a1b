"""Cheat: call cuBLAS through an alias, so that no line says `torch.matmul`.
Expected: rejected, static.library_call (aliases resolve to the dotted name they stand for)."""

import torch
from torch import matmul as fused_tile_product


_product = fused_tile_product


def gemm(a, b):
    return _product(a, b)
