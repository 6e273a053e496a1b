"""`NAME::attention(q, k, v, causal, scale)`: the evolved attention kernel as a torch custom op, SDPA its fallback.

q is [B, Hq, S, D], k and v [B, Hkv, S, D] with Hq a multiple of Hkv (grouped-query heads): SDPA's layout, with
`enable_gqa=True` when Hq != Hkv. The op calls the kernel only for inputs the guard says the run's cases covered;
any other input, and any call autograd will differentiate, gets SDPA's answer (cuDNN where torch picks it).
"""

from __future__ import annotations

import collections
import math

import torch
import torch.nn.functional as F

from . import _guard, _loader

__all__ = ["NAMESPACE", "attention", "attention_op", "calls", "fallbacks", "library"]

NAMESPACE = __name__.rpartition(".")[0]
_SDPA = F.scaled_dot_product_attention  # taken before any patch() replaces it
calls = collections.Counter()
"""Calls that reached the op: "op" (all), "kernel", "library"; `fallbacks` counts the library's by reason. (A
patch() route traced by torch.compile leaves a call the guard refuses to the library uncounted.)"""
fallbacks = collections.Counter()
_verdicts: dict = {}
"""Eager calls' verdicts, by layout and causal (`_counted_refusal`)."""


def library(q, k, v, causal: bool, scale: float) -> torch.Tensor:
    return _SDPA(q, k, v, is_causal=causal, scale=scale, enable_gqa=q.shape[1] != k.shape[1])


def _refusal(q, k, v, causal: bool, traced: bool = False) -> str | None:
    """Why the library takes these inputs, or None. At a covered shape the run never timed, the answer of its first
    call (guard.first_call), or while torch.compile traces (`traced`: q, k, v are fake) the answer that call would
    reach, timed here once on real tensors of these shapes (with symbolic sizes left to the op, at run time)."""
    if q.dim() != 4 or k.dim() != 4 or k.shape != v.shape:
        return "shape (q, k, v not [B, H, S, D] with k and v alike)"
    (b, hq, s, d), (bk, hkv, sk, dk) = q.shape, k.shape
    if (b, s, d) != (bk, sk, dk) or hkv == 0 or hq % hkv:
        return "shape (k, v do not match q, or Hq is not a multiple of Hkv)"
    dims = {"B": b, "Hq": hq, "Hkv": hkv, "S": s, "D": d, "group": hq // hkv, "causal": bool(causal)}
    reason = _guard.refusal((q, k, v), dims)
    if reason is not None or not _guard.untimed(dims, q.dtype, q.device):
        return reason
    if not traced:
        return _first_call(q, k, v, bool(causal))
    if not all(type(size) is int for size in (b, hq, hkv, s, d)):
        return None
    return _first_call_of(q.device.type, q.device.index, str(q.dtype).removeprefix("torch."), b, hq, hkv, s, d,
                          bool(causal))


def _first_call(q, k, v, causal: bool) -> str | None:
    kernel, scale = _loader.entry("attention"), _scale(q, None)
    return _guard.first_call((q.device, q.dtype, q.shape, k.shape, causal), q.dtype,
                             lambda: kernel(q, k, v, causal, scale), lambda: library(q, k, v, causal, scale))


@torch.compiler.assume_constant_result  # run as plain Python while tracing; its answer is taken as it is
def _first_call_of(device_type: str, index: int | None, dtype: str, b: int, hq: int, hkv: int, s: int, d: int,
                   causal: bool) -> str | None:
    if torch._C._len_torch_dispatch_stack():  # a dispatch mode (fake tensors) would see these calls: the op decides
        return None
    device = torch.device(device_type) if index is None else torch.device(device_type, index)
    q = torch.randn(b, hq, s, d, dtype=getattr(torch, dtype), device=device)
    k, v = (torch.randn(b, hkv, s, d, dtype=getattr(torch, dtype), device=device) for _ in range(2))
    return _first_call(q, k, v, causal)


@torch.library.custom_op(f"{NAMESPACE}::attention", mutates_args=())
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float) -> torch.Tensor:
    return _attention(q, k, v, causal, scale)


def _attention(q, k, v, causal: bool, scale: float) -> torch.Tensor:
    if _counted_refusal(q, k, v, causal) is None:
        return _loader.entry("attention")(q, k, v, causal, scale)
    return library(q, k, v, causal, scale)


def _counted_refusal(q, k, v, causal: bool, gqa: bool = True) -> str | None:
    """`_refusal` (or, inside a CUDA graph capture, guard.capture_refusal), the call counted where it goes. `gqa`:
    whether Hq may differ from Hkv (SDPA's enable_gqa; the op's own calls always may)."""
    key = (causal, gqa, q.shape, q.stride(), q.dtype, q.device, k.shape, k.stride(), k.dtype, k.device, v.shape,
           v.stride(), v.dtype, v.device)  # everything a refusal reads of them, flat (guard.remembered says why)
    reason = _guard.verdict(_verdicts, key, _route_refusal, q, k, v, causal, gqa)
    return _guard.counted(calls, fallbacks, reason, "attention", q)


def _route_refusal(q, k, v, causal: bool, gqa: bool, traced: bool = False) -> str | None:
    if not gqa and q.dim() == k.dim() and q.dim() > 1 and q.shape[1] != k.shape[1]:
        return "shape (Hq differs from Hkv without enable_gqa)"
    return _refusal(q, k, v, bool(causal), traced)


@attention_op.register_fake
def _(q, k, v, causal, scale):
    return q.new_empty((*q.shape[:-1], v.shape[-1]))


def attention(q, k, v, causal: bool = False, scale: float | None = None) -> torch.Tensor:
    """softmax(q kᵀ · scale, causal mask optional) v; scale defaults to 1/sqrt(D), as SDPA's does."""
    scale = _scale(q, scale)
    if _guard.wants_grad(q, k, v):
        return library(q, k, v, causal, scale)
    if _guard.eager(q, k, v):
        return _attention(q, k, v, causal, scale)
    return attention_op(q, k, v, causal, scale)


def _scale(q, scale: float | None) -> float:
    return 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)


def _sdpa_route(original):
    def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                     scale=None, enable_gqa=False):
        # Decided here, eager or traced: a call the guard refuses is made as it was. (An eager call's verdict is kept
        # by layout: one seen before costs a lookup.)
        if attn_mask is None and dropout_p == 0.0 and not _guard.wants_grad(query, key, value):
            if _guard.eager(query, key, value):
                if _counted_refusal(query, key, value, is_causal, enable_gqa) is None:
                    return _loader.entry("attention")(query, key, value, is_causal, _scale(query, scale))
            elif _route_refusal(query, key, value, is_causal, enable_gqa, traced=True) is None:
                return attention_op(query, key, value, is_causal, _scale(query, scale))
        return original(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                        scale=scale, enable_gqa=enable_gqa)

    return scaled_dot_product_attention


ROUTES = [(F, "scaled_dot_product_attention", _sdpa_route)]
