"""Cheat: run cuBLAS on a worker thread (an op recorder is per thread) reached through a module name built at run
time, so neither an import nor the library name appears in the source.
Expected: rejected, runtime.thread."""

import queue

import torch


_MODULE = bytes([116, 104, 114, 101, 97, 100, 105, 110, 103]).decode()
_OP = bytes([109, 109]).decode()


def gemm(a, b):
    results = []
    worker = getattr(queue, _MODULE).Thread(target=lambda: results.append(getattr(torch, _OP)(a, b)))
    worker.start()
    worker.join()
    return results[0]
