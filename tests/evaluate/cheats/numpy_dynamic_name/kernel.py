"""Cheat (beyond the list): NumPy's BLAS on the tensors' data, the method's name built at run time. NumPy computes
outside torch's dispatcher, so the run-time op recorder would see only the copies, and under the interpreter the
product would score as fast as the library: only the static guard can stop it, by refusing NumPy arrays of tensors.
Expected: rejected, static.library_call.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr):  # a kernel of its own, so the static guard's "no kernel" rule is not what stops it
    tl.store(x_ptr, tl.load(x_ptr))


_NAME = "".join(reversed(["t", "o", "d"]))


def gemm(a, b):
    product = getattr(a.float().numpy(), _NAME)(b.float().numpy())
    return torch.from_numpy(product).to(a.dtype)
