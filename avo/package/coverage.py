"""What a candidate was checked on, as the packaged guard reads it: per shape dimension the range (or the set of
values) its evaluation's cases covered, the dtypes, and the GPU it ran on. An input outside any of these goes to
the library.

A case's shape comes from the task's suites (the run's workload among them) by name; a case no suite holds is read
from its name, which the task builds from its shape (a dtype or magnitude suffix after it).
"""

from __future__ import annotations

import re
import statistics

from avo.errors import UserError
from avo.evaluate.result import geomean
from avo.gpus import profile_named
from avo.tasks import SUITES

RANGES = {"attention": ("B", "Hq", "Hkv", "S", "group"), "gemm": ("M", "N", "K")}
"""Dimensions covered as [lowest, highest]: any value between was as much the kernel's business as the ends."""
VALUES = {"attention": ("D", "causal"), "gemm": ()}
"""Dimensions covered only at the values seen: a head dim is a different kernel specialization, not a size."""
_NAMES = {
    "attention": re.compile(r"b(?P<B>\d+)_h(?P<Hq>\d+)-(?P<Hkv>\d+)_s(?P<S>\d+)_d(?P<D>\d+)(?P<causal>_causal)?"
                            r"(?=_|$)"),
    "gemm": re.compile(r"(?P<M>\d+)x(?P<N>\d+)x(?P<K>\d+)(?=_|$)"),
}
SHAPE = {"attention": ("B", "Hq", "Hkv", "S", "D", "causal"), "gemm": ("M", "N", "K")}
"""What names one timed shape exactly, with the dtype after it."""


def _case_params(task, result) -> list[tuple]:
    """(case result, its shape params or None where they cannot be told) for each case of `result`: by name from
    every suite the task has (the run's workload among them), else read from the name."""
    known = {}
    for suite in SUITES:
        try:
            known.update({case.name: case.params for case in task.cases(suite)})
        except UserError:  # a suite this task does not have
            continue
    return [(case, known.get(case.case) or _from_name(task.name, case.case)) for case in result.cases]


def case_shapes(task, result) -> tuple[list[dict], list[str]]:
    """(shape params of each case of `result`, names of the cases whose shape could not be told)."""
    cases = _case_params(task, result)
    shapes = [{**params, "dtype": case.dtype} for case, params in cases if params is not None]
    return shapes, [case.case for case, params in cases if params is None]


def _from_name(task: str, name: str) -> dict | None:
    match = _NAMES[task].match(name)
    if match is None:
        return None
    return {key: (value is not None) if key == "causal" else int(value) for key, value in match.groupdict().items()}


def capability_of(result) -> list[int]:
    """The compute capability of the GPU `result` was timed on, as the evaluator recorded it, else as avo's profile of
    that GPU's name says; [] where neither tells (the guard then takes no other GPU as the run's kin)."""
    recorded = result.versions.get("gpu_capability")
    if recorded:
        return [int(part) for part in recorded.split(".")]
    profile = profile_named(result.versions.get("gpu_device", ""))
    return list(profile.compute_capability) if profile is not None else []


def covered(task: str, shapes: list[dict], gpu_device: str, capability: list[int] | None = None) -> dict:
    """The guard's section of MANIFEST.json: what an input must match to reach the kernel. On a GPU other than
    `gpu_device` of the same `capability`, every covered shape is judged by its first call (the package's guard)."""
    if not shapes:
        raise UserError("the candidate's evaluation names no case whose shape avo can read: nothing to guard with")
    rows = [dict(s, group=s["Hq"] // s["Hkv"]) if task == "attention" else s for s in shapes]
    return {
        "device": "cuda",
        "device_names": [gpu_device] if gpu_device else [],
        "capabilities": [capability] if gpu_device and capability else [],
        "dtypes": sorted({row["dtype"] for row in rows}),
        "contiguous": True,
        "ranges": {dim: [min(row[dim] for row in rows), max(row[dim] for row in rows)] for dim in RANGES[task]},
        "values": {dim: sorted({row[dim] for row in rows}) for dim in VALUES[task]},
    }


def library_faster(task, result, *, weigh_host: bool = True) -> dict:
    """The guard's "library_faster" section: each timed shape the guard sends to the library, the geomean of its
    GPU speedups beside it, and why: "gpu", the library was faster on the GPU (the geomean below 1); or, with
    `weigh_host`, "host", the GPU time the kernel saves per call is less than the host time it adds (the run's
    median host µs per call of each, from the evaluator's warm-up calls), so a call whose GPU waits on the host
    loses more than it gains ("host_us": [saved, added] for those). Exact shapes only. "timed_shapes" lists every
    timed shape: a covered shape that is none of them has its first call on the user's GPU time the kernel against
    the library, by the same rules (the package's guard.first_call)."""
    dims = SHAPE[task.name]
    timed: dict[tuple, list] = {}
    for case, params in _case_params(task, result):
        if case.speedup is not None and case.speedup > 0 and params is not None:
            timed.setdefault((*(params[d] for d in dims), case.dtype), []).append(case)
    left = {}
    for key, cases in timed.items():
        speedup = geomean([c.speedup for c in cases])
        if speedup < 1.0:
            left[key] = (speedup, "gpu", None)
        elif weigh_host and (costs := _host_costs(cases)) is not None and costs[0] < costs[1]:
            left[key] = (speedup, "host", [round(costs[0], 1), round(costs[1], 1)])
    return {"dims": [*dims, "dtype"], "shapes": [list(key) for key in left],
            "speedups": [round(speedup, 4) for speedup, _, _ in left.values()],
            "reasons": [reason for _, reason, _ in left.values()],
            "host_us": [costs for _, _, costs in left.values()], "timed": len(timed),
            "timed_shapes": [list(key) for key in timed]}


def _host_costs(cases) -> tuple[float, float] | None:
    """(GPU µs the kernel saves per call, host µs it adds per call) over one shape's cases, medians; None where a
    case lacks a figure."""
    fields = ("ms", "library_ms", "host_us", "library_host_us")
    if any(getattr(c, f, None) is None for c in cases for f in fields):
        return None
    saved = statistics.median(c.library_ms - c.ms for c in cases) * 1000
    added = statistics.median(c.host_us for c in cases) - statistics.median(c.library_host_us for c in cases)
    return saved, added
