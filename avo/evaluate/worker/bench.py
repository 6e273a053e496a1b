"""The bench stage of the worker: each bench case checked once, then timed interleaved with the library.

Timed calls run unwatched (no dispatch modes: they would cost time), so they are held to account around the clock:
every timed output must be a plain tensor; one timed call drawn at random is checked against the reference on the
inputs it was given (`check.timed_output`); after timing, one more call on fresh inputs runs watched exactly like a
check call (poisoned memory, op recorder, type, inputs unchanged, value), so a kernel that behaves only while the
check suite runs is caught; and work left running on a side stream when a call returned is caught by the device-wide
synchronize in timing.py (`runtime.side_stream`).

Every check here, the one before timing included, compares against `task.timed_reference` where a task defines one
(attention on a GPU: the library's output, within 0.003 of the exact reference on these shapes, where the exact one
is far slower even on TF32 tensor cores), else against `task.reference`. The check suite always uses the exact
reference.
"""

from __future__ import annotations

import random
from typing import Any

from avo.evaluate import guards
from avo.evaluate.guards import Rejection, check_output_type
from avo.evaluate.worker.candidate import Candidate, Context, Verdict, classify
from avo.evaluate.worker.check import check_case
from avo.evaluate.worker.correctness import CaseFailure, checked_call, verify_output
from avo.evaluate.worker.precision import needs_tf32_library, tf32_allowed
from avo.evaluate.worker.rotation_memory import free_gpu_bytes, output_bytes, rotation_sets, tensor_bytes
from avo.evaluate.worker.stage_clock import Parts
from avo.evaluate.worker.timing import Contender, InputRotation, ratio_error, time_as_configured

SIDE_STREAM_RELATIVE = 0.05
SIDE_STREAM_ABSOLUTE_MS = 0.03
"""A candidate's device-busy time past its end event may exceed the library's by this much (5% + 30 µs) at most."""
LIBRARY = "library"
LIBRARY_TF32 = "library_tf32"
"""The library with TF32 allowed: timed only beside a candidate whose float32 error is past fp32's."""
AUDIT_CALL = 10**9
"""Rotation index of the watched call after timing (beyond any timed call's index: its inputs are new)."""


class _CandidateRaised(Exception):
    def __init__(self, index: int, exc: BaseException):
        super().__init__(str(exc))
        self.index, self.exc = index, exc


class SpotChecks:
    """Per candidate: the first timed output that is not a plain tensor, and one timed call drawn at random."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.count: dict[str, int] = {}
        self.sample: dict[str, tuple[int, Any]] = {}
        self.bad_type: dict[str, tuple[int, Exception]] = {}

    def observe(self, name: str, i: int, args: tuple, out: Any) -> None:
        if name in (LIBRARY, LIBRARY_TF32):
            return
        try:
            check_output_type(out)
        except Rejection as exc:
            self.bad_type.setdefault(name, (i, exc))
        n = self.count[name] = self.count.get(name, 0) + 1
        if self.rng.randrange(n) == 0:
            self.sample[name] = (i, out)

    def kept(self, name: str) -> list[tuple[int, Any]]:
        return [self.sample[name]] if name in self.sample else []


def bench(ctx: Context, cands: list[Candidate], forbidden: frozenset[str]) -> None:
    task = ctx.task
    merged = ctx.check_suite == ctx.bench_suite  # the interpreter's tiny suite: already checked, time it only
    wanted = max(1, ctx.config.input_sets)
    reference = ctx.timed_reference
    parts = Parts("bench")
    for ci, case in enumerate(task.cases(ctx.bench_suite)):
        live = [c for c in cands if c.passing]
        if not live:
            break
        ctx.progress.mark("bench", case.name)
        parts.start("inputs")
        sources = [task.make_inputs(case, ctx.seed + 1_000_000 + 1000 * ci, ctx.tensor_device)]
        size = _rotation_size(ctx, case, sources[0], wanted)
        sources += [task.make_inputs(case, ctx.seed + 1_000_000 + 1000 * ci + k, ctx.tensor_device)
                    for k in range(1, size.sets)]
        if size.reduced:
            for cand in live:
                cand.result.notes.append(size.note(case.name))
        rows = {}
        # The library's ops on this case's shapes, recorded in the set-up (evaluation._bench_ops); on the merged
        # suite they are in `forbidden` already, recorded over the check cases.
        case_forbidden = forbidden | ctx.bench_ops.get(case.name, frozenset())
        parts.start("check")
        ref = None if merged else reference(*sources[0])
        for cand in live:
            if merged:
                rows[cand.index] = next(r for r in cand.result.cases if r.case == case.name)
                continue
            try:
                row = check_case(ctx, cand, case, sources[0], cand.watched(case_forbidden), ctx.bench_suite, ref)
            except Verdict as verdict:
                cand.finish(verdict)
                continue
            cand.result.cases.append(row)
            if row.correct:
                rows[cand.index] = row
        timed = [c for c in live if c.passing and c.index in rows]
        while timed:
            try:
                _time_case(ctx, case, timed, rows, sources, case_forbidden, seed=ctx.seed + ci, parts=parts)
                break
            except _CandidateRaised as raised:
                cand = next(c for c in timed if c.index == raised.index)
                cand.finish(classify(raised.exc, cand, f"timed call on case {case.name}"))
                timed = [c for c in timed if c.passing]
        parts.start("release")
        del sources
        release_memory(ctx)
        parts.stop()
    for cand in cands:
        cand.result.stage_s.update(parts.seconds)
        if cand.passing:
            try:
                cand.sentinel.verify("bench")
            except guards.Rejection as exc:
                cand.finish(Verdict("rejected", exc.rule, exc.message))


def _time_case(ctx: Context, case: Any, timed: list[Candidate], rows: dict, sources: list, forbidden: frozenset[str],
               seed: int, parts: Parts) -> None:
    task = ctx.task
    rotation = InputRotation(sources, seed)
    spots = SpotChecks(seed)

    def runner(cand):
        def run(args):
            try:
                return task.call(cand.entry, args)
            except Exception as exc:
                raise _CandidateRaised(cand.index, exc) from exc
        return run

    contenders = [Contender(f"candidate{c.index}", rotation, runner(c)) for c in timed]
    contenders.insert(1, Contender(LIBRARY, rotation, lambda args: task.library(*args)))
    tf32 = {c.index for c in timed if case.dtype == "float32" and needs_tf32_library(c.result.cases)}
    if tf32:
        contenders.insert(2, Contender(LIBRARY_TF32, rotation, _tf32_library(task)))
    cfg = ctx.config
    parts.start("timing")
    measured = time_as_configured(contenders, cfg, device=ctx.device, l2_bytes=ctx.gpu.l2_mb << 20,
                                  on_output=spots.observe, paired_with=LIBRARY)
    parts.start("verify")
    lib = measured[LIBRARY]
    flops = task.flops(case)
    shape, dtype = task.output_like(case, sources[0])
    for cand in timed:
        name = f"candidate{cand.index}"
        try:
            _reject_timed_misconduct(ctx, case, name, measured, spots)
            audited = _audit_call(ctx, case, cand, rotation, forbidden)
        except Verdict as verdict:
            cand.finish(verdict)
            continue
        row = rows[cand.index]
        _check_timed_outputs(ctx, case, cand, row, [*spots.kept(name), audited], rotation, shape, dtype)
        _record_times(row, measured[name], measured[LIBRARY_TF32] if cand.index in tf32 else lib, flops)
        if case.dtype == "float32":
            row.library_precision = "tf32" if cand.index in tf32 else "fp32"
        _note_host_bound(cand, case, measured[name])


def _tf32_library(task: Any):
    def run(args):
        with tf32_allowed():
            return task.library(*args)
    return run


def _reject_timed_misconduct(ctx: Context, case: Any, name: str, measured: dict, spots: SpotChecks) -> None:
    """Verdict for work left on a side stream when the clock stopped, or a timed output that was not a tensor."""
    mine, lib = measured[name], measured[LIBRARY]
    if ctx.device == "cuda":
        excess = mine.sync_gap_ms - lib.sync_gap_ms
        if excess > SIDE_STREAM_RELATIVE * mine.ms + SIDE_STREAM_ABSOLUTE_MS:
            raise Verdict("rejected", "runtime.side_stream", (
                f"case {case.name}: the GPU stayed busy {excess:.3f} ms longer after the call returned than "
                f"after the library's (the call's own stream took {mine.ms:.3f} ms): work on a side stream must "
                "be joined to the current stream before returning"))
    if name in spots.bad_type:
        i, exc = spots.bad_type[name]
        raise Verdict("rejected", exc.rule, f"{exc.message} (case {case.name}, timed call {i})")


def _check_timed_outputs(ctx: Context, case: Any, cand: Candidate, row: Any, outputs: list[tuple[int, Any]],
                         rotation: InputRotation, shape: Any, dtype: Any) -> None:
    """The sampled timed output and the audited one, each against the reference on its own call's inputs."""
    task, reference = ctx.task, ctx.timed_reference
    for i, out in outputs:
        ref = reference(*rotation.rebuild(i))
        try:
            verify_output(out, ref, expected_shape=shape, expected_dtype=dtype, device=out.device,
                          tolerance=row.tolerance or task.tolerance(case.dtype), case=case.name)
        except CaseFailure as failure:
            which = "the call after timing" if i == AUDIT_CALL else f"timed call {i}"
            cand.failures.append(CaseFailure("check.timed_output", (
                f"{which}: {failure.message} (a timed output must match the reference for the inputs "
                "of that call: no caching, no dependence on earlier calls)")))
            row.correct, row.message = False, cand.failures[-1].message
            return


def _record_times(row: Any, mine: Any, lib: Any, flops: float) -> None:
    row.ms, row.library_ms = mine.ms, lib.ms
    row.spread, row.library_spread = mine.spread, lib.spread
    row.ms_error, row.library_ms_error = mine.error, lib.error
    row.rounds = len(mine.round_medians_ms)
    row.host_us, row.launch_shield_us = mine.host_us, mine.shield_us  # None off a GPU
    row.library_host_us = lib.host_us
    row.speedup_error = ratio_error(mine, lib)
    row.speedup = lib.ms / mine.ms if mine.ms > 0 else None
    row.tflops = flops / (mine.ms * 1e-3) / 1e12 if mine.ms > 0 and flops > 0 else None
    row.library_tflops = flops / (lib.ms * 1e-3) / 1e12 if lib.ms > 0 and flops > 0 else None


def _note_host_bound(cand: Candidate, case: Any, mine: Any) -> None:
    """A note where the wrapper's host time per call outlasts the kernel: the launch shield keeps it off the clock
    (the speedup is the GPU's), but a caller that waits on each call would wait for the host."""
    if mine.host_us is not None and mine.host_us > 1000 * mine.ms:
        cand.result.notes.append(
            f"case {case.name}: the wrapper's host time per call ({mine.host_us:.0f} µs) exceeds its GPU time "
            f"({1000 * mine.ms:.0f} µs); the launch shield ({mine.shield_us:.0f} µs) keeps host time off the clock, "
            "so the speedup is the GPU's, and a caller that waits on each call would see the host's")


def _rotation_size(ctx: Context, case: Any, first: tuple, wanted: int):
    """How many input sets fit on the GPU beside the outputs (rotation_memory.py); `wanted` off a GPU."""
    shape, dtype = ctx.task.output_like(case, first)
    return rotation_sets(wanted, tensor_bytes(first), output_bytes(tuple(shape), dtype), free_gpu_bytes(ctx.device))


def _audit_call(ctx: Context, case: Any, cand: Candidate, rotation: InputRotation, forbidden: frozenset[str]) -> tuple:
    """One more call on fresh inputs after the clock stopped, watched like a check call: (index, output)."""
    args = rotation(AUDIT_CALL)
    before = guards.fingerprint(args)
    try:
        out = checked_call(ctx.task, case, cand.entry, args, cand.watched(forbidden), ctx.device)
        guards.check_inputs_unchanged(before, args)
    except Exception as exc:
        raise classify(exc, cand, f"the call after timing on case {case.name}") from None
    return AUDIT_CALL, out


def release_memory(ctx: Context) -> None:
    if ctx.device == "cuda":
        import torch

        torch.cuda.synchronize()
        torch.cuda.empty_cache()
