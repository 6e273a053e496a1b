"""The guard in front of the kernel: an input the kernel was not checked on goes to the library instead.

MANIFEST.json's "guard" section says what the run's check and bench cases covered: the device (and which GPU), the
dtypes, the layout, and per shape dimension a range or a set of values. `refusal` names the first thing an input
falls outside of, or returns None when every part of it was covered. Its "library_faster" section lists the timed
shapes at which the library measured faster than the kernel on the GPU, or at which the kernel saved less GPU time
per call than it added host time: those go to the library too, unless it was packaged with --keep-slower
("enforced" false). A covered shape that is none of its "timed_shapes" (a range holds the shapes between the timed
ones, and a model's may be none of them) is checked and timed by its first call here, kernel against library, on the
caller's GPU, and judged by the same rules (first_call). On a GPU other than the run's, of the same compute capability
("capabilities"), nothing the run timed holds: every covered shape is judged so. On any other GPU the library takes
every call.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import torch

MANIFEST = json.loads(Path(__file__).with_name("MANIFEST.json").read_text())
COVERED = MANIFEST["guard"]
# Read once: the checks below run on every call, inside the caller's host time.
_DTYPES = {getattr(torch, name, None) for name in COVERED["dtypes"]} - {None}
_RANGES = tuple((dim, low, high) for dim, (low, high) in COVERED["ranges"].items())
_VALUES = tuple((dim, frozenset(values), values) for dim, values in COVERED["values"].items())
_FASTER = COVERED.get("library_faster") or {"dims": [], "shapes": [], "speedups": [], "reasons": [], "host_us": [],
                                            "enforced": False}
_SLOWER_DIMS = tuple(_FASTER["dims"][:-1])  # the shape's dims; the dtype is the key's last part


def _why(speedup: float, reason: str, host: list | None) -> str:
    if reason == "host":
        return (f"saves less GPU time than it adds host time at this shape ({host[0]:.0f} µs against {host[1]:.0f};"
                f" {speedup:.3f}x on the GPU)")
    return f"measured slower than the library at this shape ({speedup:.3f}x)"


_SLOWER = {(*shape[:-1], getattr(torch, shape[-1], None)): _why(speedup, reason, host)
           for shape, speedup, reason, host in zip(_FASTER["shapes"], _FASTER["speedups"], _FASTER["reasons"],
                                                   _FASTER["host_us"])
           if _FASTER["enforced"]}
_DEVICE, _CONTIGUOUS = COVERED["device"], COVERED["contiguous"]
_TIMED_SHAPES = {(*shape[:-1], getattr(torch, shape[-1], None)) for shape in _FASTER.get("timed_shapes", ())}
_FIRST_CALLS = bool(_FASTER["enforced"]) and "timed_shapes" in _FASTER
"""Whether a covered shape the run never timed is timed on its first call here (first_call): unless packaged with
--keep-slower, whose guard sends every covered shape to the kernel."""


_GPUS: dict[int, str | None] = {}
_CAPABILITIES = [tuple(capability) for capability in COVERED.get("capabilities", ())]
ANOTHER_GPU = "another GPU of the run's architecture"
"""_gpu_refusal's answer on a GPU the run never ran on whose compute capability is the run's GPU's: no refusal, but
nothing the run timed holds there, so every covered shape is judged by its first call (untimed, first_call), where
the package does that (not packaged with --keep-slower)."""


@torch.compiler.assume_constant_result  # torch.compile tracing a route (patch.py) takes its answer as it is
def _gpu_refusal(index: int) -> str | None:
    """None on the GPU the run measured on; ANOTHER_GPU on another of its compute capability where first calls are
    judged; else why the library takes every call on this GPU."""
    if index not in _GPUS:
        names = COVERED["device_names"]
        name = torch.cuda.get_device_name(index) if names else ""
        capability = torch.cuda.get_device_capability(index) if names and name not in names else None
        if capability is None:
            _GPUS[index] = None
        elif _FIRST_CALLS and capability in _CAPABILITIES:
            _GPUS[index] = ANOTHER_GPU
        else:
            _GPUS[index] = (f"gpu {name} (compute capability {'.'.join(map(str, capability))}; the run measured on "
                            f"{', '.join(names)})")
    return _GPUS[index]


def wants_grad(*tensors: torch.Tensor) -> bool:
    """No backward was evolved: a call that autograd will differentiate stays on the library."""
    if torch.is_grad_enabled():
        for t in tensors:  # a loop, not any() over a generator: this runs on every routed call, in its host time
            if t.requires_grad:
                return True
    return False


_PLAIN = (torch.Tensor, torch.nn.Parameter)  # a Parameter has torch functions disabled: plain to the dispatcher


def eager(*tensors: torch.Tensor) -> bool:
    """Whether a call may run the op's body directly, skipping the dispatcher (about 7-10 µs of host time a call):
    plain tensors (or parameters), nothing tracing (torch.compile, export, FX, torch.jit.trace) and no dispatch mode
    active. Anywhere else the op goes through torch.library, so graphs hold it as one node."""
    if _compiling() or _tracing() or _modes():
        return False
    for t in tensors:  # a loop, not all() over a generator (wants_grad says why)
        if type(t) not in _PLAIN:
            return False
    return True


# Bound once: eager() runs on every routed call. (torch.jit.is_tracing() is torch._C._is_tracing() outside
# TorchScript, where a route never runs.)
_compiling, _tracing, _modes = torch.compiler.is_compiling, torch._C._is_tracing, torch._C._len_torch_dispatch_stack


CAPTURE = "capture (a CUDA graph is being captured and kernel.py does not say its kernel may be: CUDA_GRAPHS)"


def capture_refusal(entry: str, tensor: torch.Tensor) -> str | None:
    """CAPTURE while a CUDA graph is captured on `tensor`'s device and the kernel.py defining `entry` does not
    declare CUDA_GRAPHS = True: such a kernel may keep what it made for the captured call (the graph's memory) and
    use it again on later calls, as the CUDA seeds kept a tile counter per stream before they declared it, so the
    library takes the call. Asked on every call the kernel would take, never kept: a capture lasts one call."""
    if tensor.is_cuda and torch.cuda.is_current_stream_capturing():
        from . import _loader

        if not _loader.entry(entry).__globals__.get("CUDA_GRAPHS"):
            return CAPTURE
    return None


def counted(calls, fallbacks, reason: str | None, entry: str, tensor: torch.Tensor) -> str | None:
    """Where a call goes, counted: `reason` (the guard's verdict), or where the kernel would take it,
    capture_refusal's. Counts in `calls` ("op", "kernel", "library") and `fallbacks` (the library's, by reason)."""
    if reason is None:
        reason = capture_refusal(entry, tensor)
    calls["op"] += 1
    if reason is None:
        calls["kernel"] += 1
    else:
        calls["library"] += 1
        fallbacks[reason] += 1
    return reason


def untimed(dims: dict, dtype, device: torch.device) -> bool:
    """Whether the run never timed this covered shape (its exact dims and dtype), or timed it on another GPU than
    this one (ANOTHER_GPU), and its first call here can time the kernel against the library (first_call): on a
    device in TIMED_ON; elsewhere the kernel takes it, as the guard's ranges say."""
    return (_FIRST_CALLS and device.type in TIMED_ON
            and ((*[dims[dim] for dim in _SLOWER_DIMS], dtype) not in _TIMED_SHAPES
                 or _gpu_refusal(device.index or 0) == ANOTHER_GPU))


def capturing() -> bool:
    """Whether a CUDA graph is being captured on the current stream: nothing is checked or timed then."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


TIMED_ON = ("cuda",)
TIMING_ROUNDS, TIMING_CALLS = 3, 5
"""A first call's timing: the kernel and the library alternately, the best of 3 rounds of 5 calls each, on the GPU
and on the host."""
TIMED = "timed on this GPU)"
TOLERANCE = 1e-2
_TOLERANCES = {getattr(torch, case.get("dtype") or "", None): case["tolerance"] for case in
               sorted(MANIFEST["cases"], key=lambda case: case.get("tolerance") or 0) if case.get("tolerance")}
"""Per dtype, the largest tolerance the run checked the kernel's cases with (TOLERANCE where it names none): a first
call's answer must be as close to the library's."""
_FIRST: dict = {}
"""(device, dtype, shape) -> the first call's verdict at an untimed shape (first_call)."""


def first_call(key, dtype, ours, library) -> str | None:
    """At a covered shape the run never timed (a range holds shapes between its timed ones, and a model's may be
    none of them): the kernel's call `ours` checked against the library's call `library` on the caller's own inputs
    (their answers within the run's tolerance for `dtype`: the run never checked this shape either), then timed
    against it, once per `key` (the shape, dtype and device); why the library takes the shape, or None where the
    kernel agreed, was faster on the GPU and saved more GPU time per call than it added host time (the run's rules).
    Asked only where `untimed` says so. Nothing is checked inside a CUDA graph capture: the library takes that call,
    and the verdict waits for one outside."""
    reason = _FIRST.get(key, _UNSEEN)
    if reason is not _UNSEEN:
        return reason
    if capturing():
        return f"untimed shape ({NOT_YET}: no timing inside a CUDA graph capture)"
    error, tolerance = _error(ours(), library()), _TOLERANCES.get(dtype, TOLERANCE)
    if not error <= tolerance:
        reason = (f"the kernel's answer differed from the library's at this shape on its first call (relative error "
                  f"{error:.2e}, tolerance {tolerance:g})")
    else:
        (speedup, saved, added), reason = timed(ours, library), None
        if speedup <= 1:
            reason = f"measured slower than the library at this shape on its first call ({speedup:.3f}x, {TIMED}"
        elif saved <= added:
            reason = (f"saves less GPU time than it adds host time at this shape on its first call ({saved:.1f} µs "
                      f"against {added:.1f}; {TIMED}")
    _FIRST[key] = reason
    return reason


def timed(ours, library) -> tuple[float, float, float]:
    """`ours` against `library` (best_times): the speedup on the GPU, and the µs of GPU time it saves and of host time
    it adds per call. (The run's rules: the library where the speedup is at most 1, or the saving at most the
    addition.)"""
    (ours_ms, ours_host), (library_ms, library_host) = best_times(ours, library)
    return library_ms / ours_ms, (library_ms - ours_ms) * 1e3, ours_host - library_host


def _error(out: torch.Tensor, expected: torch.Tensor) -> float:
    """||out - expected|| / ||expected||, inf where that is not finite. The difference is taken in `out`'s own memory
    (the kernel's fresh output, of no further use) and the norms in the tensors' own dtype: a first call at a large
    shape holds no more than the two outputs."""
    if out.shape != expected.shape:
        return float("inf")
    scale = float(torch.linalg.vector_norm(expected))
    in_place = out.is_contiguous() and out.dtype == expected.dtype
    difference = float(torch.linalg.vector_norm(out.sub_(expected) if in_place else out - expected))
    if not math.isfinite(difference):
        return float("inf")
    return difference / scale if scale else (0.0 if difference == 0.0 else float("inf"))


SPIN_CYCLES_PER_US, SPIN_FIT, SPIN_MAX_US = 2000, 2.0, 20000.0
"""Before each round's start event the device spins (torch.cuda._sleep, about 2,000 cycles a µs; longer at lower
clocks) for SPIN_FIT times what the host took to queue the round's calls, gauged by a warm-up call, at most
SPIN_MAX_US: the host queues the calls while the device is busy, so the events time the GPU's work alone, not the
host's, as the run's evaluator does. (A shape whose kernel takes less GPU time than its wrapper takes host time would
otherwise read as the host's speed.)"""


def best_times(*calls) -> list[tuple[float, float]]:
    """(ms on the GPU, µs of host time) per call of each of `calls`, each the best over TIMING_ROUNDS rounds of
    TIMING_CALLS calls, the calls alternating round by round (CUDA events on the current stream, behind a spin that
    keeps the host's queueing off the clock; the host's time to queue the round's calls)."""
    best = [(float("inf"), float("inf"))] * len(calls)
    for _ in range(TIMING_ROUNDS):
        for i, call in enumerate(calls):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            began = time.perf_counter()
            call()
            warm_us = (time.perf_counter() - began) * 1e6
            torch.cuda._sleep(int(min(SPIN_MAX_US, SPIN_FIT * TIMING_CALLS * warm_us) * SPIN_CYCLES_PER_US))
            start.record()
            began = time.perf_counter()
            for _ in range(TIMING_CALLS):
                call()
            host = (time.perf_counter() - began) * 1e6 / TIMING_CALLS
            end.record()
            end.synchronize()
            best[i] = (min(best[i][0], start.elapsed_time(end) / TIMING_CALLS), min(best[i][1], host))
    return best


_UNSEEN = object()
_KEPT_VERDICTS = 4096
NOT_YET = "not yet checked"
"""In a reason that may change on a later call (a check that could not run yet): such a verdict is not kept."""


def remembered(verdicts: dict, tensors: tuple[torch.Tensor, ...], extra, decide, *args) -> str | None:
    """`decide(*args)`'s verdict for these tensors, kept in `verdicts` by everything a refusal reads of them (shape,
    strides, dtype, device) and `extra`: the same call again costs a dictionary lookup, not the checks. Only for
    real tensors (an eager call, or the op's body at run time), never while tracing. (A route on a hot path builds
    the same key flat and asks `verdict` with it: a call it leaves on the library then costs about a microsecond
    less.)"""
    return verdict(verdicts, (extra, *[(t.shape, t.stride(), t.dtype, t.device) for t in tensors]), decide, *args)


def verdict(verdicts: dict, key, decide, *args) -> str | None:
    """The verdict kept in `verdicts` under `key`; else `decide(*args)`'s, kept there unless it may change on a later
    call (NOT_YET). Past _KEPT_VERDICTS layouts the kept ones are dropped first. (`decide` and its arguments apart, not
    a closure: a route on a hot path then makes no closure per call.)"""
    reason = verdicts.get(key, _UNSEEN)
    if reason is _UNSEEN:
        reason = decide(*args)
        if reason is None or NOT_YET not in reason:
            if len(verdicts) >= _KEPT_VERDICTS:
                verdicts.clear()
            verdicts[key] = reason
    return reason


def refusal(tensors: tuple[torch.Tensor, ...], dims: dict) -> str | None:
    """Why these inputs must not reach the kernel, or None when the run's cases covered them. (Plain loops and
    lookups: this runs before every call the package routes, in the caller's host time.)"""
    device, dtype = tensors[0].device, tensors[0].dtype
    if device.type != _DEVICE:
        return f"device {device.type}"
    for t in tensors:
        if t.device != device:
            return f"device {device.type}"
        if t.dtype != dtype:
            return f"dtype {str(t.dtype).removeprefix('torch.')}"
        if _CONTIGUOUS and not t.is_contiguous():
            return "layout (not contiguous)"
    gpu = _gpu_refusal(device.index or 0)
    if gpu is not None and gpu != ANOTHER_GPU:
        return gpu
    if dtype not in _DTYPES:
        return f"dtype {str(dtype).removeprefix('torch.')}"
    for dim, low, high in _RANGES:
        if not low <= dims[dim] <= high:
            return f"{dim}={dims[dim]} outside {low}..{high}"
    for dim, allowed, values in _VALUES:
        if dims[dim] not in allowed:
            return f"{dim}={dims[dim]} not among {values}"
    if _SLOWER and gpu is None:  # the run's timings, on the GPU they were taken on
        return _SLOWER.get((*[dims[dim] for dim in _SLOWER_DIMS], dtype))
    return None
