"""Cheat (beyond the list): reach the reference's own aten kernel through torch.ops with names built at run time.
Expected: rejected, runtime.library_op (the op recorder sees aten.mm however it was reached)."""

import torch


_NS = "".join(chr(c) for c in (97, 116, 101, 110))
_OP = "".join(chr(c) for c in (109, 109))


def gemm(a, b):
    return getattr(getattr(torch.ops, _NS), _OP)(a, b)
