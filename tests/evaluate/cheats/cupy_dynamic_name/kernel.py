"""Cheat (beyond the list): cuBLAS through CuPy, the function's name built at run time. CuPy computes outside torch's
dispatcher, so the run-time op recorder would see nothing and the output would be correct: only the static guard can
stop it, by refusing the cupy module handed to getattr with a name it cannot read.
Expected: rejected, static.library_call.
"""

import cupy
import torch

_NAME = "".join(reversed(["l", "u", "m", "t", "a", "m"]))


def gemm(a, b):
    product = getattr(cupy, _NAME)(cupy.from_dlpack(a), cupy.from_dlpack(b))
    return torch.from_dlpack(product)
