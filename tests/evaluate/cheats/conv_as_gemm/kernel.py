"""Cheat (beyond the list): a GEMM is a 1x1 convolution; call cuDNN's convolution through a computed name.
Expected: rejected, runtime.library_op (the reference's op family includes convolutions)."""

import torch
import torch.nn.functional


_CONV = "conv" + str(1) + "d"


def gemm(a, b):
    weight = b.t().contiguous()[:, :, None]           # [N, K, 1]
    out = getattr(torch.nn.functional, _CONV)(a.t()[None], weight)  # [1, N, M]
    return out[0].t().contiguous()
