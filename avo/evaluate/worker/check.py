"""The check stage of the worker: a candidate's Triton kernels compiled ahead, then every check case once.

Each case's inputs are fresh (seeded per evaluation); the call is watched (poisoned memory, op recorder, inputs
unchanged, output type) and its output compared with the reference within the dtype's tolerance. A wrong output is
a failure that is collected (the remaining cases still run); anything that ends the candidate (an exception from
its code, a guard) is a Verdict.

The bench stage's timed outputs are checked on inputs scaled by factors across timing.SCALE_RANGE, so the check
suite covers that range too: the first case as the task draws it, the others scaled by its top and bottom in turn.
Scaling changes little for a linear kernel, but much where a threshold follows: relu(1.5 (x W^T + b - 2)) on
KernelBench's U(0, 1) inputs is zero everywhere (its check compared zeros with zeros), while past the threshold, on
scaled inputs, TF32's relative error of 8e-4 on x W^T grows to 5e-3 (scale 2) and 2.4e-2 (scale 1.15), which only the
timed calls saw before.
"""

from __future__ import annotations

from typing import Any

from avo.evaluate import guards
from avo.evaluate.result import CaseResult
from avo.evaluate.worker.candidate import Candidate, Context, Verdict, classify
from avo.evaluate.worker.correctness import CaseFailure, checked_call, verify_layout, verify_output
from avo.evaluate.worker.precision import library_error
from avo.evaluate.worker.stage_clock import stage
from avo.evaluate.worker.timing import SCALE_RANGE, scaled
from avo.tasks.base import relative_error

CHECK_SCALES = (SCALE_RANGE[1], SCALE_RANGE[0])
"""Input scales of check cases 1, 2, 3, ... in turn (case 0 runs on the inputs as drawn)."""


def check_scale(index: int) -> float:
    return 1.0 if index == 0 else CHECK_SCALES[(index - 1) % len(CHECK_SCALES)]


def compile_candidate(ctx: Context, cand: Candidate) -> None:
    """The candidate's Triton kernels compiled ahead, in parallel, for every case of both suites (precompile.py);
    a CUDA C++ candidate's declared builds likewise (cuda_ahead.py)."""
    if ctx.compile_pool is None:
        return
    if cand.cuda:
        compile_cuda_candidate(ctx, cand)
        return
    from avo.evaluate.worker.precompile import compile_ahead, meta_calls

    ctx.progress.mark("compile", "ahead", cand.index)
    with stage(cand.result.stage_s, "compile"):
        outcome = compile_ahead(ctx.compile_pool, meta_calls(ctx.task, cand.entry, [ctx.check_suite, ctx.bench_suite]))
        cand.sentinel.verify("compile")
    if outcome.failed or outcome.skipped:
        cand.result.notes.append(
            f"compile ahead ({outcome.way}): {outcome.kernels - outcome.failed} of {outcome.kernels} kernels built, "
            f"{outcome.skipped} of {outcome.cases + outcome.skipped} cases' wrappers failed on meta tensors; the rest "
            "compiled on first launch" + (f" ({outcome.note})" if outcome.note else ""))


def compile_cuda_candidate(ctx: Context, cand: Candidate) -> None:
    import torch

    from avo.cuda import compile_notices, target_arch
    from avo.evaluate.worker.cuda_ahead import compile_builds_ahead

    ctx.progress.mark("compile", "ahead", cand.index)
    with stage(cand.result.stage_s, "compile"):
        arch = target_arch(torch.cuda.get_device_capability(0))
        outcome = compile_builds_ahead(cand.path, arch, ctx.compile_pool.workers)
        cand.sentinel.verify("compile")
    if outcome.compiled < outcome.builds:
        cand.result.notes.append(f"compile ahead: {outcome.compiled} of {outcome.builds} CUDA builds compiled; the "
                                 "rest compiled on first launch")
    cand.result.notes += [f"ptxas: {notice}" for notice in compile_notices(cand.path)]


def check_inputs(ctx: Context, index: int, case: Any) -> tuple:
    """Check case `index`'s inputs: drawn from the evaluation's seed, then scaled (check_scale). The references'
    producer (references.py) draws the same ones in its own process."""
    inputs = ctx.task.make_inputs(case, ctx.seed + index, ctx.tensor_device)
    scale = check_scale(index)
    # Rebound: the unscaled copy is freed (a KernelBench input set can be gigabytes).
    return scaled(inputs, [scale] * len(inputs)) if scale != 1.0 else inputs


def check_label(index: int, case: Any) -> str:
    scale = check_scale(index)
    return case.name if scale == 1.0 else f"{case.name} (inputs scaled by {scale:g})"


def check_candidate(ctx: Context, cand: Candidate, forbidden: frozenset[str]) -> None:
    """Every case of the check suite once, on fresh inputs, each output judged outside this process (the judge's
    verdicts come back once all are sent); failures are collected, verdicts end the stage."""
    task = ctx.task
    cand.result.notes += getattr(task, "size_notes", lambda suite: [])(ctx.check_suite)  # KernelBench tasks
    with stage(cand.result.stage_s, "check"):
        rows = []
        for i, case in enumerate(task.cases(ctx.check_suite)):
            ctx.progress.mark("compile" if i == 0 else "check", case.name, cand.index)
            rows.append(_judged_case(ctx, cand, i, case, cand.watched(forbidden)))
            cand.result.cases.append(rows[-1])
        answer = ctx.judge.verdicts(cand.index)
        if answer.get("error"):
            raise Verdict("crash", "crash", answer["error"])
        for verdict in answer.get("cases") or []:
            row = rows[verdict["index"]]
            row.correct, row.rel_err, row.library_rel_err = verdict["correct"], verdict["rel_err"], \
                verdict["library_rel_err"]
            if not row.correct:
                row.message = verdict["message"]
                cand.failures.append(CaseFailure(verdict["rule"], verdict["message"]))
        cand.sentinel.verify("check")


def _judged_case(ctx: Context, cand: Candidate, index: int, case: Any, forbidden: frozenset[str]) -> CaseResult:
    """Check case `index`: the watched call and its layout here, its values by the judge (sent now)."""
    task, label = ctx.task, check_label(index, case)
    row = CaseResult(case=case.name, suite=ctx.check_suite, dtype=case.dtype, tolerance=task.tolerance(case.dtype),
                     input_scale=check_scale(index))
    inputs = check_inputs(ctx, index, case)
    out = _watched_call(ctx, cand, case, inputs, forbidden, label)
    shape, dtype = task.output_like(case, inputs)
    try:
        verify_layout(out, expected_shape=shape, expected_dtype=dtype, device=_device_of(inputs), case=label)
    except CaseFailure as failure:
        row.correct, row.message = False, failure.message
        cand.failures.append(failure)
        return row
    ctx.judge.submit(cand.index, index, out)
    return row


def _device_of(inputs: tuple) -> Any:
    return next((x.device for x in inputs if hasattr(x, "device")), None)


def _watched_call(ctx: Context, cand: Candidate, case: Any, inputs: tuple, forbidden: frozenset[str],
                  label: str) -> Any:
    before = guards.fingerprint(inputs)
    try:
        out = checked_call(ctx.task, case, cand.entry, inputs, forbidden, ctx.device)
        guards.check_inputs_unchanged(before, inputs)
    except Exception as exc:
        raise classify(exc, cand, f"case {label}") from None
    return out


def check_case(ctx: Context, cand: Candidate, case: Any, inputs: tuple, forbidden: frozenset[str],
               suite: str, ref: Any) -> CaseResult:
    """One watched call on `inputs`, compared here with `ref` (the bench stage's check before timing, whose
    reference is the library's output where the task times against it: the library runs in this process anyway)."""
    task = ctx.task
    tolerance = task.tolerance(case.dtype)
    row = CaseResult(case=case.name, suite=suite, dtype=case.dtype, tolerance=tolerance)
    out = _watched_call(ctx, cand, case, inputs, forbidden, case.name)
    shape, dtype = task.output_like(case, inputs)
    try:
        row.rel_err = verify_output(out, ref, expected_shape=shape, expected_dtype=dtype, device=_device_of(inputs),
                                    tolerance=tolerance, case=case.name)
        row.correct = True
        if case.dtype == "float32":  # what fp32 gives here, for precision parity (worker/precision.py)
            row.library_rel_err = library_error(task, inputs, ref)
    except CaseFailure as failure:
        row.correct, row.message = False, failure.message
        if failure.rule == "check.mismatch":
            row.rel_err = relative_error(out, ref)
        cand.failures.append(failure)
    return row
