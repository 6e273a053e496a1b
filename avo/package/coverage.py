"""What a candidate was checked on, as the packaged guard reads it: per shape dimension the range (or the set of
values) its evaluation's cases covered, the dtypes, and the GPU it ran on. An input outside any of these goes to
the library.

A case's shape comes from the task's suites (the run's workload among them) by name; a case no suite holds is read
from its name, which the task builds from its shape (a dtype or magnitude suffix after it).
"""

from __future__ import annotations

import re

from avo.errors import UserError
from avo.evaluate.result import geomean
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


def covered(task: str, shapes: list[dict], gpu_device: str) -> dict:
    """The guard's section of MANIFEST.json: what an input must match to reach the kernel."""
    if not shapes:
        raise UserError("the candidate's evaluation names no case whose shape avo can read: nothing to guard with")
    rows = [dict(s, group=s["Hq"] // s["Hkv"]) if task == "attention" else s for s in shapes]
    return {
        "device": "cuda",
        "device_names": [gpu_device] if gpu_device else [],
        "dtypes": sorted({row["dtype"] for row in rows}),
        "contiguous": True,
        "ranges": {dim: [min(row[dim] for row in rows), max(row[dim] for row in rows)] for dim in RANGES[task]},
        "values": {dim: sorted({row[dim] for row in rows}) for dim in VALUES[task]},
    }


def library_faster(task, result) -> dict:
    """The guard's "library_faster" section: each timed shape at which the library was faster than the kernel (the
    geomean of its timings below 1), which the guard sends to the library. Exact shapes only: a shape between two
    timed ones is the kernel's, as its range says."""
    dims = SHAPE[task.name]
    timed: dict[tuple, list[float]] = {}
    for case, params in _case_params(task, result):
        if case.speedup is not None and case.speedup > 0 and params is not None:
            timed.setdefault((*(params[d] for d in dims), case.dtype), []).append(case.speedup)
    slower = {key: speedup for key, speedup in ((key, geomean(s)) for key, s in timed.items()) if speedup < 1.0}
    return {"dims": [*dims, "dtype"], "shapes": [list(key) for key in slower],
            "speedups": [round(speedup, 4) for speedup in slower.values()], "timed": len(timed)}
