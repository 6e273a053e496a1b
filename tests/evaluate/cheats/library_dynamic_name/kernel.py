"""Cheat: call the library through a method name built at run time, invisible to any reading of the source.
Expected: rejected, runtime.library_op (the call dispatches aten.mm, whatever spelled it)."""

import torch


_NAME = "".join(reversed(["l", "u", "m", "t", "a", "m"]))


def gemm(a, b):
    return getattr(a, _NAME)(b)
