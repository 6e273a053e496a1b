"""Run-time guards, used while the candidate runs: the op-level guard against library calls (the reference's aten
compute ops must not appear in the candidate's call, however they were reached), the output-type check, and the input
fingerprint."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from avo.evaluate.guards.modes import evaluator_mode
from avo.evaluate.guards.rules import Rejection, waived

# Ops that move, shape, allocate or index memory: a kernel wrapper may need them; none of them computes the answer.
_PLUMBING = frozenset(
    """
    empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones ones_like new_ones
    full full_like new_full fill fill_ zero_ scalar_tensor lift_fresh lift_fresh_copy alias detach detach_
    copy copy_ _to_copy to clone contiguous _copy_from _copy_from_and_resize resize_ set_ _local_scalar_dense item
    view _unsafe_view view_as reshape expand expand_as as_strided as_strided_ t transpose permute unsqueeze squeeze
    select slice narrow split split_with_sizes chunk unbind unfold flatten movedim _reshape_alias
    is_same_size is_nonzero sym_size sym_stride sym_numel sym_storage_offset record_stream
    arange linspace repeat repeat_interleave index_select gather cat stack constant_pad_nd pad
    """.split()
)

# What a candidate may dispatch through torch under ops=strict, whatever the reference used: primitives that
# allocate, view or copy memory and compute nothing from the inputs' values. Measured on CPU: an honest Triton
# kernel under the interpreter dispatches empty, empty_like, new_empty, copy_ and set_ (the interpreter's own copies);
# the CUDA seeds' wrappers add contiguous and view. Left out on purpose: every arithmetic, comparison and reduction
# op, in place or not (so zeros + add_ is caught at add_); ops that read values to the host (item, is_nonzero: host
# Python would then do the work); index-driven ones (gather, index_select, scatter); and compositions of the
# primitives (cat, stack, repeat, pad), which a wrapper can spell with them, so the list stays short enough to review.
OWN_WORK = frozenset(
    # allocation: outputs and scratch buffers
    "empty empty_like empty_strided new_empty new_empty_strided resize_ "
    # constant fills: a zeroed accumulator for split-K or atomics, -inf for a running max; arithmetic on them is not
    "zeros zeros_like new_zeros zero_ ones ones_like new_ones full full_like new_full fill fill_ scalar_tensor "
    "lift_fresh "
    # views: new shapes and strides over the same memory
    "view _unsafe_view view_as reshape _reshape_alias as_strided t transpose permute unsqueeze squeeze expand "
    "expand_as select slice narrow split split_with_sizes chunk unbind flatten unflatten movedim alias detach detach_ "
    # copies: contiguous layouts, dtype and device moves (a cast's rounding is judged by the tolerance)
    "copy copy_ _copy_from _copy_from_and_resize clone contiguous _to_copy to lift_fresh_copy set_ "
    # metadata
    "sym_size sym_stride sym_numel sym_storage_offset is_same_size record_stream".split()
)
ANY_COMPUTE = "*"
"""In a forbidden set: every op outside OWN_WORK is forbidden too, not only the reference's (ops=strict)."""
# When the reference uses one op of a family, the whole family is off limits: a GEMM is as much a GEMM through
# bmm, addmm, a 1x1 convolution or an attention kernel as through mm.
_FAMILIES = (
    frozenset(
        """
        mm bmm addmm baddbmm addbmm matmul linear _scaled_mm _int_mm mv addmv dot vdot einsum tensordot inner outer
        ger chain_matmul linalg_multi_dot _addmm_activation convolution _convolution conv1d conv2d conv3d
        cudnn_convolution mkldnn_convolution _convolution_mode conv_transpose1d conv_transpose2d conv_transpose3d
        _mkldnn_linear mkldnn_linear _weight_int8pack_mm _weight_int4pack_mm _mixed_dtypes_linear
        """.split()
    ),
    frozenset(
        """
        scaled_dot_product_attention _scaled_dot_product_attention_math _scaled_dot_product_flash_attention
        _scaled_dot_product_flash_attention_for_cpu _scaled_dot_product_efficient_attention
        _scaled_dot_product_cudnn_attention _scaled_dot_product_fused_attention_overrideable _flash_attention_forward
        _efficient_attention_forward _cudnn_attention_forward _fused_sdp_choice _softmax softmax _safe_softmax
        log_softmax _log_softmax
        """.split()
    ),
)


def _op_name(func: Any) -> str:
    """'mm' for aten.mm.default: the overload packet's name, the unit a cheat cannot dodge by picking an overload."""
    packet = getattr(func, "overloadpacket", None)
    name = getattr(packet, "__name__", None) or str(func).split(".")[1]
    return name


def _package_dir(module: Any) -> str:
    return os.path.dirname(os.path.realpath(module.__file__)) + os.sep


def _from_triton(torch_dir: str, triton_dir: str) -> bool:
    """Whether the innermost Python frame outside torch and this module, where the op was dispatched, is Triton's
    own code: its autotuner summarizes timings with torch ops on some versions, which are not the candidate's
    compute. The candidate's frames come first, a function it hands to Triton included."""
    frame = sys._getframe(2)
    while frame is not None:
        path = os.path.realpath(frame.f_code.co_filename)
        if not (path.startswith(torch_dir) or path == os.path.realpath(__file__)):
            return path.startswith(triton_dir)
        frame = frame.f_back
    return False


def _recording_mode(seen: set[str], *, skip_pointwise: bool = False):
    import torch
    import triton

    dirs = (_package_dir(torch), _package_dir(triton))

    class _Record(evaluator_mode()):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = _op_name(func)
            if not (skip_pointwise and torch.Tag.pointwise in getattr(func, "tags", ())) and (
                    name in OWN_WORK or not _from_triton(*dirs)):
                seen.add(name)
            return func(*args, **(kwargs or {}))

    return _Record()


def forbidden_ops(reference_fn: Callable[[], Any]) -> frozenset[str]:
    """The aten compute ops `reference_fn` dispatches (overload-packet names such as 'mm'), minus memory plumbing
    and pointwise ops (a wrapper may scale or mask on the host; that is not the library path), widened to every op
    of the same family."""
    seen: set[str] = set()
    with _recording_mode(seen, skip_pointwise=True):
        reference_fn()
    compute = {op for op in seen if op.rstrip("_") not in _PLUMBING and op not in _PLUMBING}
    for family in _FAMILIES:
        if compute & family:
            compute |= family
    return frozenset(compute)


def call_watched(fn: Callable[[], Any], forbidden: frozenset[str]) -> Any:
    """Run the candidate's call with every aten op it dispatches recorded; Rejection('runtime.library_op') if any is
    in `forbidden`, even when the call then raised. Ops are recorded, not refused, so a cheat cannot catch the
    refusal and carry on."""
    import torch.utils._python_dispatch as python_dispatch

    seen: set[str] = set()
    mode = _recording_mode(seen)
    try:
        with mode:
            out = fn()
            still_watching = python_dispatch._get_current_dispatch_mode() is mode
    except Exception:
        _reject_library_ops(seen, forbidden)
        raise
    _reject_library_ops(seen, forbidden)
    if not still_watching:
        raise Rejection("runtime.library_op", "the call left the op recorder's dispatch mode stack altered")
    return out


def _reject_library_ops(seen: set[str], forbidden: frozenset[str]) -> None:
    used = sorted(seen & forbidden)
    if used:
        ops = ", ".join(f"aten.{op}" for op in used)
        raise Rejection("runtime.library_op", f"the call dispatched {ops}, a compute op of the task's reference; "
                                              "compute it in your own kernel")
    if ANY_COMPUTE in forbidden:
        computed = sorted(seen - OWN_WORK)
        if computed:
            ops = ", ".join(f"aten.{op}" for op in computed)
            raise Rejection("runtime.torch_op", f"the call dispatched {ops}: under --ops strict every compute op is "
                            "the candidate's own (torch may only allocate, view and copy); compute it in your "
                            "kernel, or score it under --ops partial")


def check_output_type(out: Any) -> None:
    """The output must be exactly a torch.Tensor holding its own strided memory on a real device."""
    import torch

    if type(out) is not torch.Tensor:
        raise Rejection("runtime.output_type", f"the output is a {type(out).__module__}.{type(out).__qualname__}, "
                        "not a plain torch.Tensor")
    base = out._base
    if base is not None and type(base) is not torch.Tensor:
        raise Rejection("runtime.output_type", f"the output is a view of a {type(base).__qualname__}")
    keys = str(torch._C._dispatch_keys(out))
    if "Python" in keys or torch._C._functorch.is_functorch_wrapped_tensor(out):
        raise Rejection("runtime.output_type", "the output is a wrapper tensor (it dispatches to Python)")
    if out.layout != torch.strided or out.is_nested or out.device.type not in ("cpu", "cuda"):
        raise Rejection("runtime.output_type", f"the output is a {out.layout} tensor on {out.device.type}, "
                        "not a dense strided tensor")


_BITS = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


def _bits(t: Any) -> Any:
    """The tensor's bit pattern as integers, so NaN == NaN and -0 != +0 in an exact comparison."""
    import torch

    return t.view(getattr(torch, _BITS[t.element_size()])) if t.element_size() in _BITS else t


def fingerprint(inputs: tuple) -> list:
    """What check_inputs_unchanged compares against: for each tensor its metadata, address and an exact copy."""
    import torch

    prints = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            meta = (tuple(x.shape), tuple(x.stride()), x.storage_offset(), x.dtype, x.device, x.data_ptr())
            prints.append(("tensor", meta, x.detach().clone()))
        else:
            prints.append(("value", repr(x), None))
    return prints


def check_inputs_unchanged(before: list, inputs: tuple) -> None:
    """Rejection('runtime.input_mutated') if any input's values, shape, strides or storage changed since
    `fingerprint`."""
    import torch

    if len(before) != len(inputs):
        raise Rejection("runtime.input_mutated", "the number of inputs changed")
    for i, ((kind, meta, copy), x) in enumerate(zip(before, inputs, strict=True)):
        if kind == "value":
            if repr(x) != meta:
                raise Rejection("runtime.input_mutated", f"input {i} changed from {meta} to {x!r}")
            continue
        now = (tuple(x.shape), tuple(x.stride()), x.storage_offset(), x.dtype, x.device, x.data_ptr())
        if now != meta:
            raise Rejection("runtime.input_mutated", f"input {i}'s shape, strides, dtype or storage changed")
        if not torch.equal(_bits(x.detach()), _bits(copy)):
            raise Rejection("runtime.input_mutated", f"input {i}'s values changed during the call")


def watches_ops(ops: str) -> bool:
    """Whether the op recorder rejects the reference's compute ops under policy `ops`."""
    return not waived(ops, "runtime.library_op")


def watched_ops(ops: str, reference_ops: frozenset[str]) -> frozenset[str]:
    """What the op recorder rejects under policy `ops`: the reference's compute ops (`forbidden_ops`) and, under
    strict, every op outside OWN_WORK (ANY_COMPUTE); nothing under partial."""
    watched = reference_ops - {ANY_COMPUTE} if watches_ops(ops) else frozenset()
    return watched | {ANY_COMPUTE} if not waived(ops, "runtime.torch_op") else watched
