"""`NAME::gemm(a, b)`: the evolved matrix multiply as a torch custom op, torch.matmul (cuBLAS) its fallback.

a is [M, K], b [K, N], c = a @ b [M, N]. The op calls the kernel only for inputs the guard says the run's cases
covered; any other input, and any call autograd will differentiate, gets torch.matmul's answer.
"""

from __future__ import annotations

import collections

import torch
import torch.nn.functional as F

from . import _guard, _loader

__all__ = ["NAMESPACE", "calls", "fallbacks", "gemm", "gemm_op", "library"]

NAMESPACE = __name__.rpartition(".")[0]
_MATMUL = torch.matmul  # taken before any patch() replaces it
calls = collections.Counter()
"""Calls that reached the op: "op" (all), "kernel", "library"; `fallbacks` counts the library's by reason."""
fallbacks = collections.Counter()


def library(a, b) -> torch.Tensor:
    return _MATMUL(a, b)


def _refusal(a, b) -> str | None:
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        return "shape (not [M, K] @ [K, N])"
    return _guard.refusal((a, b), {"M": a.shape[0], "N": b.shape[1], "K": a.shape[1]})


@torch.library.custom_op(f"{NAMESPACE}::gemm", mutates_args=())
def gemm_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    calls["op"] += 1
    reason = _refusal(a, b)
    if reason is None:
        calls["kernel"] += 1
        return _loader.entry("gemm")(a, b)
    calls["library"] += 1
    fallbacks[reason] += 1
    return library(a, b)


@gemm_op.register_fake
def _(a, b):
    return a.new_empty((a.shape[0], b.shape[1]))


def gemm(a, b) -> torch.Tensor:
    """a @ b for a [M, K] and b [K, N]."""
    if _guard.wants_grad(a, b):
        return library(a, b)
    return gemm_op(a, b)


def _matmul_route(original):
    def matmul(input, other, *, out=None):
        if out is None and isinstance(input, torch.Tensor) and isinstance(other, torch.Tensor) \
                and input.dim() == other.dim() == 2:
            return gemm(input, other)
        return original(input, other) if out is None else original(input, other, out=out)

    return matmul


def _linear_route(original):
    def linear(input, weight, bias=None):
        if input.dim() < 2 or weight.dim() != 2 or _guard.wants_grad(input, weight, *(() if bias is None else
                                                                                      (bias,))):
            return original(input, weight, bias)
        # the kernel was checked on a row-major [K, N] operand: the weight's transpose is copied into one
        out = gemm(input.reshape(-1, input.shape[-1]), weight.t().contiguous())
        if bias is not None:
            out = out + bias
        return out.reshape(*input.shape[:-1], weight.shape[0])

    return linear


ROUTES = [(torch, "matmul", _matmul_route), (F, "linear", _linear_route)]
