"""Checking one call of a candidate: poisoned memory, guarded call, layout, unwritten output, NaN/Inf, error.

Every allocation the candidate makes through torch during a checked call (`torch.empty`, `empty_like`,
`new_empty`, ...) is filled with a NaN carrying a recognizable payload, on the CPU and the GPU alike; on the GPU the
caching allocator's free blocks of the output's size are filled the same way first. An output element that still
holds the payload was never written by the kernel: `check.unwritten`. Any other NaN or Inf is `check.nonfinite`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

# NaN bit patterns with a payload no arithmetic produces by itself (computed NaNs are canonical: 0x7E00, 0x7FC0, ...).
POISON_BITS = {
    "float16": ("int16", 0x7E5A),
    "bfloat16": ("int16", 0x7FDA),
    "float32": ("int32", 0x7FC0DEAD),
    "float64": ("int64", 0x7FF8DEADBEEF0BAD),
}
_ALLOCATORS = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})
RED_ZONE_BYTES = 1 << 16
"""Past the end of each tensor allocated during a checked call: a last block of up to 16384 fp32 elements."""
RED_ZONE_FILL = 0xA5


@dataclass
class CaseFailure(Exception):
    """A check the candidate's output failed (status incorrect); `rule` is a check.* id."""

    rule: str
    message: str


def poison(tensor: Any) -> None:
    """Fill a floating-point tensor with the payload NaN (other dtypes are left alone)."""
    import torch

    dtype = str(tensor.dtype).removeprefix("torch.")
    if dtype not in POISON_BITS or tensor.numel() == 0:
        return
    int_dtype, bits = POISON_BITS[dtype]
    with torch.no_grad():
        tensor.view(getattr(torch, int_dtype)).fill_(bits)


def poisoned_mask(out: Any) -> Any:
    """Boolean tensor: where `out` still holds the payload NaN."""
    import torch

    dtype = str(out.dtype).removeprefix("torch.")
    if dtype not in POISON_BITS:
        return torch.zeros(out.shape, dtype=torch.bool, device=out.device)
    int_dtype, bits = POISON_BITS[dtype]
    return out.detach().view(getattr(torch, int_dtype)) == bits


def poison_cuda_cache(shape: tuple[int, ...], dtype: str, blocks: int = 4) -> None:
    """Leave the caching allocator with free blocks of the output's size holding the payload NaN, so memory the
    kernel obtains there (even bypassing the dispatcher) starts out poisoned."""
    import torch

    held = [torch.empty(shape, dtype=getattr(torch, dtype), device="cuda") for _ in range(blocks)]
    for t in held:
        poison(t)
    torch.cuda.synchronize()
    del held


def poison_allocations():
    """A dispatch mode that poisons every tensor allocated through torch's empty-family ops while it is active, and
    gives each contiguous one a red zone of RED_ZONE_BYTES past its end: `overrun()` names the first allocation whose
    red zone was written (a last block stored unmasked), which no output comparison can see."""
    import torch

    from avo.evaluate.guards.modes import evaluator_mode

    class _PoisonAllocations(evaluator_mode()):
        zones: list = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func.overloadpacket.__name__ in _ALLOCATORS:
                if isinstance(out, torch.Tensor) and out.numel() and out.is_contiguous():
                    out = self._zoned(out)
                poison(out)
            return out

        def _zoned(self, out):
            size = out.numel() * out.element_size()
            whole = torch.empty(size + RED_ZONE_BYTES, dtype=torch.uint8, device=out.device)
            whole[size:].fill_(RED_ZONE_FILL)
            self.zones.append((whole, size, tuple(out.shape), out.dtype))
            return whole[:size].view(out.dtype).view(out.shape)

        def overrun(self) -> str | None:
            for whole, size, shape, dtype in self.zones:
                if not bool((whole[size:] == RED_ZONE_FILL).all()):
                    return f"a {shape} {str(dtype).removeprefix('torch.')} tensor it allocated"
            return None

    mode = _PoisonAllocations()
    mode.zones = []
    return mode


def checked_call(task: Any, case: Any, entry: Callable, inputs: tuple, forbidden: frozenset[str],
                 device: str) -> Any:
    """The candidate's call on poisoned memory, watched for library ops; its output, type-checked."""
    from avo.evaluate import guards

    if device == "cuda":
        shape, dtype = task.output_like(case, inputs)
        poison_cuda_cache(tuple(shape), dtype)
    with poison_allocations() as allocations:
        out = guards.call_watched(lambda: task.call(entry, inputs), forbidden)
    if device == "cuda":
        # Device-wide: work left on a side stream finishes before the output is read, so such a kernel is judged by
        # the timing stage's side-stream check (a precise verdict) rather than by a race here.
        import torch

        torch.cuda.synchronize()
    overrun = allocations.overrun()
    if overrun:
        raise CaseFailure("check.out_of_bounds", f"case {case.name}: the call wrote past the end of {overrun} (a "
                          "last block stored without its mask?)")
    guards.check_output_type(out)
    return out


def verify_output(out: Any, ref: Any, *, expected_shape: tuple, expected_dtype: str, device: Any,
                  tolerance: float, case: str) -> float:
    """Relative error of `out` against `ref`; CaseFailure naming the case if any check fails."""
    verify_layout(out, expected_shape=expected_shape, expected_dtype=expected_dtype, device=device, case=case)
    return verify_values(out, ref, tolerance=tolerance, case=case)


def verify_layout(out: Any, *, expected_shape: tuple, expected_dtype: str, device: Any, case: str) -> None:
    """Shape, dtype, device and contiguity: what needs no reference (checked where the candidate ran)."""
    got_dtype = str(out.dtype).removeprefix("torch.")
    if tuple(out.shape) != tuple(expected_shape) or got_dtype != expected_dtype:
        raise CaseFailure("check.output_layout", f"case {case}: output is {tuple(out.shape)} {got_dtype}, expected "
                          f"{tuple(expected_shape)} {expected_dtype}")
    if out.device != device:
        raise CaseFailure("check.output_layout", f"case {case}: output is on {out.device}, inputs on {device}")
    if not out.is_contiguous():
        raise CaseFailure("check.output_layout", f"case {case}: output is not contiguous (strides {out.stride()})")


def verify_values(out: Any, ref: Any, *, tolerance: float, case: str) -> float:
    """Unwritten elements, NaN or Inf, then the relative error within `tolerance` (on any device: the check suite's
    outputs are compared by avo itself, on the CPU, judge.py)."""
    import torch

    from avo.tasks import relative_error

    finite_ref = torch.isfinite(ref)
    unwritten = poisoned_mask(out) & finite_ref
    if bool(unwritten.any()):
        count = int(unwritten.sum())
        first = tuple(int(i) for i in unwritten.nonzero()[0])
        raise CaseFailure("check.unwritten", f"case {case}: {count} of {out.numel()} output elements were never "
                          f"written (first at index {first}); the output memory was filled with NaN before the call")
    bad = ~torch.isfinite(out) & finite_ref
    if bool(bad.any()):
        first = tuple(int(i) for i in bad.nonzero()[0])
        raise CaseFailure("check.nonfinite", f"case {case}: {int(bad.sum())} of {out.numel()} output elements are "
                          f"NaN or Inf (first at index {first}) where the reference is finite")
    err = relative_error(out, ref)
    if not err <= tolerance:
        raise CaseFailure("check.mismatch", f"case {case}: relative error {err:.3g} exceeds the tolerance "
                          f"{tolerance:g} (||out - ref|| / ||ref||)")
    return err
