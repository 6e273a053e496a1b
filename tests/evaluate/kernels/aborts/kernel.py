"""A candidate whose process dies on the first call, as one whose native code aborts (a failed assertion in a C
extension, a driver fault) would. CPython's own test module stands in for that native code."""

import _testcapi

import torch


def gemm(a, b):
    c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    _testcapi.fatal_error(b"native code gave up")  # prints the message, then abort(): SIGABRT
    return c
