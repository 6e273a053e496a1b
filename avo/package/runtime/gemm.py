"""`NAME::gemm(a, b)`: the evolved matrix multiply as a torch custom op, torch.matmul (cuBLAS) its fallback.

a is [M, K], b [K, N], c = a @ b [M, N]. The op calls the kernel only for inputs the guard says the run's cases
covered; any other input, and any call autograd will differentiate, gets torch.matmul's answer.

nn.Linear computes x @ weight.t(): b is then the transpose of a contiguous [N, K] tensor. The run checked and timed
the kernel on row-major operands only, so such a b reaches it only when its kernel.py says it reads that layout in
place (READS_TRANSPOSED_B) and, once per (N, K, dtype, M up to a power of two), its answer there matched its answer
on the row-major copy and it saved more GPU time per call than it added host time against the library, both timed then
on this GPU (a kernel reads a transposed b through other code, at its own speed; a call whose GPU waits on the host
loses what the kernel adds there, the guard's rule for the run's own shapes); while torch.compile traces a route,
that first call's check runs then, on tensors of the call's shapes, so the graph holds the library's own node
wherever the op would refuse. Otherwise the library takes the call: copying the weight on every call would cost more
than the kernel can gain over cuBLAS.
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
"""Calls that reached the op: "op" (all), "kernel", "library"; `fallbacks` counts the library's by reason. (A
patch() route traced by torch.compile leaves a call the guard refuses to the library uncounted.)"""
fallbacks = collections.Counter()


AGREEMENT = 1e-2
"""A transposed b's answer may differ from the row-major one's by rounding only: by at most this fraction of the
largest |element| (a misread box of B is off by about the elements' own size)."""
_verdicts: dict = {}
"""Eager calls' verdicts, by layout (guard.remembered)."""
_linear_verdicts: dict = {}
"""patch()'s nn.Linear route's eager verdicts, by the layout of the input and weight as the caller passed them."""
_transposed_verdicts: dict = {}
"""(device, dtype, N, K, M's power of two) -> why the library takes a transposed b there, or None: the kernel's
answer matched its row-major one, and it saved more GPU time than it added host time."""


def library(a, b) -> torch.Tensor:
    return _MATMUL(a, b)


def _transposed(b) -> bool:
    return not b.is_contiguous() and b.t().is_contiguous()


def _refusal(a, b) -> str | None:
    reason = _guard_refusal(a, b)
    if reason is not None:
        return reason
    return _transposed_refusal(a, b) if _transposed(b) else _first_call_refusal(a, b)


def _first_call_refusal(a, b) -> str | None:
    """At a shape the run never timed, its first call's verdict (guard.first_call): the kernel against torch.matmul
    on these operands. (A transposed b's first call times it already: _transposed_refusal.)"""
    (m, k), n = a.shape, b.shape[1]
    if not _guard.untimed({"M": m, "N": n, "K": k}, a.dtype, a.device):
        return None
    kernel = _loader.entry("gemm")
    return _guard.first_call((a.device, a.dtype, m, n, k), a.dtype, lambda: kernel(a, b), lambda: library(a, b))


def _guard_refusal(a, b) -> str | None:
    """The guard's answer, a transposed b read as the row-major tensor it views (whether the kernel reads that
    layout is `_transposed_refusal`'s question)."""
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        return "shape (not [M, K] @ [K, N])"
    rows = b.t() if _transposed(b) else b
    return _guard.refusal((a, rows), {"M": a.shape[0], "N": b.shape[1], "K": a.shape[1]})


def _transposed_refusal(a, b) -> str | None:
    kernel = _loader.entry("gemm")
    if not kernel.__globals__.get("READS_TRANSPOSED_B", False):
        return "layout (b is a transposed view the kernel does not read in place)"
    key = (a.device, a.dtype, b.shape[1], b.shape[0], (a.shape[0] - 1).bit_length())
    if key not in _transposed_verdicts:
        if _guard.capturing():
            return f"layout (a transposed b {_guard.NOT_YET}: no check inside a CUDA graph capture)"
        _transposed_verdicts[key] = _first_transposed_verdict(kernel, a, b)
    return _transposed_verdicts[key]


def _traced_refusal(a, b) -> str | None:
    """`_refusal` while torch.compile traces a route: the guard's answer and, for a transposed b or a shape the run
    never timed, the verdict its first call would reach (the check and the timing, run here once on real tensors of
    these shapes), so a call the op would send to the library at run time is the library's own node in the graph.
    With symbolic sizes that verdict is left to the op, at run time."""
    reason = _guard_refusal(a, b)
    (m, k), n = a.shape, b.shape[1]
    if reason is not None or not all(type(size) is int for size in (m, n, k)):
        return reason
    transposed = _transposed(b)
    if not transposed and not _guard.untimed({"M": m, "N": n, "K": k}, a.dtype, a.device):
        return None
    return _verdict_of(a.device.type, a.device.index, str(a.dtype).removeprefix("torch."), m, n, k, transposed)


@torch.compiler.assume_constant_result  # run as plain Python while tracing; its answer is taken as it is
def _verdict_of(device_type: str, index: int | None, dtype: str, m: int, n: int, k: int,
                transposed: bool) -> str | None:
    if torch._C._len_torch_dispatch_stack():  # a dispatch mode (fake tensors) would see these calls: the op decides
        return None
    device = torch.device(device_type) if index is None else torch.device(device_type, index)
    a = torch.randn(m, k, dtype=getattr(torch, dtype), device=device)
    if transposed:
        return _transposed_refusal(a, torch.randn(n, k, dtype=getattr(torch, dtype), device=device).t())
    return _first_call_refusal(a, torch.randn(k, n, dtype=getattr(torch, dtype), device=device))


def _first_transposed_verdict(kernel, a, b) -> str | None:
    ours, rows = kernel(a, b), kernel(a, b.contiguous())
    if not bool((ours.float() - rows.float()).abs().max() <= AGREEMENT * rows.float().abs().max()):
        return "layout (the kernel's answer for a transposed b differed from its row-major one)"
    if a.device.type in _guard.TIMED_ON:
        speedup, saved, added = _guard.timed(lambda: kernel(a, b), lambda: library(a, b))
        if speedup <= 1:
            return (f"layout (the kernel reads a transposed b slower than the library here: {speedup:.3f}x, "
                    f"{_guard.TIMED}")
        if saved <= added:
            return (f"layout (a transposed b: the kernel saves {saved:.1f} µs of GPU time a call here, no more than "
                    f"the {added:.1f} µs of host time it adds; {_guard.TIMED}")
    return None


@torch.library.custom_op(f"{NAMESPACE}::gemm", mutates_args=())
def gemm_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _gemm(a, b)


def _gemm(a, b) -> torch.Tensor:
    return _loader.entry("gemm")(a, b) if _counted_refusal(a, b) is None else library(a, b)


def _linear_refusal(input, weight) -> str | None:
    """`_refusal` of F.linear's arguments as the kernel would take them (views: the weight is never copied)."""
    return _refusal(input.reshape(-1, input.shape[-1]), weight.t())


def _counted_refusal(a, b) -> str | None:
    """`_refusal` (or, inside a CUDA graph capture, guard.capture_refusal), the call counted where it goes."""
    reason = _guard.remembered(_verdicts, (a, b), None, _refusal, a, b)
    return _guard.counted(calls, fallbacks, reason, "gemm", a)


@gemm_op.register_fake
def _(a, b):
    return a.new_empty((a.shape[0], b.shape[1]))


def gemm(a, b) -> torch.Tensor:
    """a @ b for a [M, K] and b [K, N]."""
    if _guard.wants_grad(a, b):
        return library(a, b)
    return _gemm(a, b) if _guard.eager(a, b) else gemm_op(a, b)


def _matmul_route(original):
    def matmul(input, other, *, out=None):
        if out is None and isinstance(input, torch.Tensor) and isinstance(other, torch.Tensor) \
                and input.dim() == other.dim() == 2 and (_guard.eager(input, other)
                                                         or _traced_refusal(input, other) is None):
            return gemm(input, other)
        return original(input, other) if out is None else original(input, other, out=out)

    return matmul


def _linear_route(original):
    def linear(input, weight, bias=None):
        if input.dim() < 2 or weight.dim() != 2 or (_guard.wants_grad(input, weight) if bias is None else
                                                    _guard.wants_grad(input, weight, bias)):
            return original(input, weight, bias)
        # Decided here, eager or traced: a call the guard refuses is made as it was.
        if _guard.eager(input, weight):  # by the arguments' layout, before any view of them is made
            key = (input.shape, input.stride(), input.dtype, input.device, weight.shape, weight.stride(), weight.dtype,
                   weight.device)  # flat (guard.remembered says why)
            reason = _guard.verdict(_linear_verdicts, key, _linear_refusal, input, weight)
            if _guard.counted(calls, fallbacks, reason, "gemm", input) is not None:
                return original(input, weight, bias)
            out = _loader.entry("gemm")(input.reshape(-1, input.shape[-1]), weight.t())  # views: no weight copied
        else:
            a, b = input.reshape(-1, input.shape[-1]), weight.t()
            if _traced_refusal(a, b) is not None:
                return original(input, weight, bias)
            out = gemm_op(a, b)
        if bias is not None:
            out = out.add_(bias)  # the op's own fresh output, outside autograd
        return out.reshape(*input.shape[:-1], weight.shape[0])

    return linear


ROUTES = [(torch, "matmul", _matmul_route), (F, "linear", _linear_route)]
