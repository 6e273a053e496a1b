"""The evaluate tool's work: score the workspace, commit it, and decide, noise-aware, whether it becomes the best.

A candidate replaces the best only if it is correct and faster by more than the measured noise, and an interleaved
re-run of both (`Evaluator.confirm`) agrees. A suspicious score (above the GPU's peak, far above the library) is
never accepted on its own: only a clean re-run can make it the best. A re-run is bracketed by `confirm_start` and
`confirm_end` events, so a run killed in between decides on resume (`finish_confirmation`).
"""

from __future__ import annotations

import math
from pathlib import Path

from typing import TYPE_CHECKING, Callable

from avo.agent.buckets import annotate_folder
from avo.agent.heuristic import knobs as knob_lines
from avo.evaluate.result import weighted_error
from avo.run.lineage.records import content_hash
from avo.agent import unsafe_files
from avo.util import procs, safe_files
from avo.util.format import number

if TYPE_CHECKING:
    from avo.agent.tools.base import ToolContext

MIN_NOISE = 0.01
"""Smallest margin a gain must clear, even when the timer reports less spread (repeated medians vary ~1%)."""
SIGMAS = 2.0
MAX_MESSAGE_CHARS = 2_000
MAX_NOTES, MAX_NOTE_CHARS = 6, 400
"""The evaluator's notes the agent reads with a result: the first few, each cut to one paragraph."""


def noise(*results) -> float:
    """Relative margin a fitness difference between these results must clear: SIGMAS standard errors of it.

    Fitness is a geometric mean of per-case speedups, so the relative standard error of one result's fitness is
    sqrt(sum of the cases' squared errors) / cases, each case's error combining the candidate's and the library's
    (the standard error of their medians, from the per-round medians). Results without those errors (older runs)
    use the per-call spread instead, which overstates the error of a median many times over. Floor: MIN_NOISE.
    """
    return bucket_noise(None, *results)


def bucket_noise(bucket: str | None, *results) -> float:
    """`noise` over the bench cases of one shape bucket (None: all of them), each case weighted as in the
    fitness (a workload's weights; equal weights give sqrt(sum of squares) / cases)."""
    variance = 0.0
    for r in results:
        cases = [c for c in r.bench_cases() if bucket is None or c.bucket == bucket]
        if cases:
            variance += weighted_error([_case_error(c) for c in cases], [c.weight for c in cases]) ** 2
    return max(MIN_NOISE, SIGMAS * math.sqrt(variance))


def _case_error(case) -> float:
    if case.ms_error is not None:
        return math.hypot(case.ms_error, case.library_ms_error or 0.0)
    return math.hypot(case.spread or 0.0, case.library_spread or 0.0)


def evaluate_workspace(ctx: ToolContext, rationale: str):
    duplicate = ctx.lineage.find_duplicate(ctx.workspace)
    if duplicate is not None:
        return answer_duplicate(ctx, duplicate)
    parent = ctx.state.parent
    return file_result(ctx, ctx.workspace, parent, rationale, ctx.evaluator.evaluate(ctx.workspace))


def answer_duplicate(ctx: ToolContext, duplicate: str):
    """The answer for a candidate byte-identical to `duplicate`: its earlier result, nothing evaluated."""
    ctx.state.parent = duplicate
    result = ctx.run.load_eval(duplicate)
    text = f"not re-evaluated: the workspace is byte-identical to {duplicate}"
    if result is not None:
        text += f" ({result.summary()})"
    return text, report(ctx, duplicate, ctx.lineage.info(duplicate).parent, result, accepted=False,
                        duplicate_of=duplicate, verdict="duplicate")


def file_result(ctx: ToolContext, folder: Path, parent: str | None, rationale: str, result):
    """Commit a scored candidate (the files of `folder`), decide whether it becomes the best, answer the agent."""
    run, lineage = ctx.run, ctx.lineage
    result = unsafe_files.screened(Path(folder), result)  # a link or special file it planted while it ran
    # Which cases took which entry of the kernel's per-shape table: acceptance and the agent weigh buckets apart.
    annotate_folder(result, Path(folder), getattr(ctx, "config", None))
    run.hold_eval(result)
    cid = lineage.commit(folder, parent=parent, result=result, model=ctx.state.model,
                         rationale=rationale)
    run.save_eval(cid, result)
    ctx.state.parent = cid
    ctx.state.candidates += 1
    accepted, verdict = decide(ctx, cid, result, Path(folder))
    if accepted:
        lineage.accept(cid)
        ctx.state.since_improvement = 0
    else:
        ctx.state.since_improvement += 1
    if ctx.state.last_confirm:
        run.append_event("confirm_end", cid=cid, accepted=accepted, verdict=verdict)
    data = report(ctx, cid, parent, result, accepted=accepted, duplicate_of=None, verdict=verdict)
    data["confirm"], ctx.state.last_confirm = ctx.state.last_confirm, None  # the re-run, kept in the transcript
    return render(cid, parent, result, verdict, data), data


def decide(ctx: ToolContext, cid: str, result, candidate: Path | None = None) -> tuple[bool, str]:
    """(accepted, why) for a freshly committed candidate, whose files are in `candidate` (default: the workspace)."""
    if result.status != "correct":
        return False, f"not accepted: {result.status}"
    best = ctx.lineage.best
    best_result = ctx.run.load_eval(best) if best else None
    if best_result is None or best_result.status != "correct":
        if result.suspicious:
            return confirm(ctx, cid, result, None, candidate)
        return True, "accepted: first correct candidate"
    margin = noise(result, best_result)
    split = _split(result, best_result, lambda: _moves_only_shared_knobs_from(ctx, best, candidate or ctx.workspace))
    if split and split[0] == "mixed":
        return False, f"not accepted: {split[1]} (its winning bucket's part alone may pay)"
    if result.fitness <= best_result.fitness * (1 + margin) and split is None:
        return False, (f"not accepted: fitness {result.fitness:.4g} does not beat best {best} "
                       f"({best_result.fitness:.4g}) by more than the noise ({margin:.1%})")
    return confirm(ctx, cid, result, best, candidate)


def bucket_verdict(result, incumbent) -> tuple[str, str] | None:
    """Bucket by bucket, where the kernel has a per-shape table of two buckets or more: ('mixed', why) when one
    bucket gains and another loses, each beyond its own noise; ('gain', why) when some bucket gains beyond its noise
    and none loses beyond it; None otherwise (no table, or no bucket moved beyond its noise)."""
    buckets = [b for b in result.buckets() if b in incumbent.buckets()]
    if len(buckets) < 2:
        return None
    gains, losses = [], []
    for b in buckets:
        before = incumbent.weighted_fitness(b)
        if before <= 0:
            continue
        change, margin = result.weighted_fitness(b) / before - 1.0, bucket_noise(b, result, incumbent)
        if abs(change) > margin:
            (gains if change > 0 else losses).append(f"{b} {change:+.1%} (noise {margin:.1%})")
    if gains and losses:
        return "mixed", f"bucket {', '.join(gains)} gains but {', '.join(losses)} loses"
    return ("gain", f"bucket {', '.join(gains)} gains, no bucket loses beyond its noise") if gains else None


def moves_only_shared_knobs(candidate: Path, incumbent: Path) -> bool:
    """Whether `candidate` is `incumbent` with only knobs outside any table entry set otherwise (every other file
    and line the same): a move with no bucket's part to try alone. Where one bucket gains and another loses, such a
    move is decided by the geomean over every case, as the user's fitness is; a move of a table entry is not."""
    try:
        before = safe_files.read_file(incumbent, "kernel.py")[0].decode()
        after = safe_files.read_file(candidate, "kernel.py")[0]
        knobs = knob_lines.parse_knobs(before)
        point = knob_lines.point_of(knob_lines.parse_knobs(after.decode()))
        same_else = content_hash(incumbent, {"kernel.py": knob_lines.render(before, point).encode()}) \
            == content_hash(candidate)
    except (OSError, ValueError, SyntaxError):  # unreadable, not a knob file, a link (UnsafeFile)
        return False
    changed = {k.name for k in knobs if k.value != point[k.name]}
    return same_else and bool(changed) and all(k.bucket is None for k in knobs if k.name in changed)


def _split(result, incumbent, shared: Callable[[], bool]) -> tuple[str, str] | None:
    """bucket_verdict, except that a mixed one reads as none where `shared()` (asked only then) says the move set
    only knobs every bucket shares: it has no bucket's part to try alone, so the whole fitness decides."""
    split = bucket_verdict(result, incumbent)
    return None if split and split[0] == "mixed" and shared() else split


def _moves_only_shared_knobs_from(ctx: ToolContext, best: str, candidate: Path) -> bool:
    with procs.temp_dir("best") as tmp:
        ctx.lineage.checkout(best, Path(tmp))
        return moves_only_shared_knobs(candidate, Path(tmp))


def confirm(ctx: ToolContext, cid: str, result, best: str | None, candidate: Path | None = None) -> tuple[bool, str]:
    """Re-run the candidate interleaved with the best (or alone, when there is none) and decide on that."""
    ctx.run.append_event("confirm_start", cid=cid, against=best)
    with procs.temp_dir("incumbent") as tmp:
        incumbent = Path(tmp)
        ctx.lineage.checkout(best if best else cid, incumbent)
        again, incumbent_again = ctx.evaluator.confirm(candidate or ctx.workspace, incumbent)
        annotate_folder(again, candidate or ctx.workspace, getattr(ctx, "config", None))
        annotate_folder(incumbent_again, incumbent, getattr(ctx, "config", None))
        split = _split(again, incumbent_again, lambda: moves_only_shared_knobs(candidate or ctx.workspace, incumbent))
    ctx.state.last_confirm = {"cid": cid, "against": best, "candidate": again.model_dump(mode="json"),
                                 "incumbent": incumbent_again.model_dump(mode="json")}
    if again.status != "correct":
        return False, f"not accepted: the confirmation re-run was {again.status} ({again.summary()})"
    if again.suspicious:
        return False, f"not accepted: still suspicious on re-run ({again.suspicious_reason})"
    if best is None:
        return True, f"accepted: clean re-run gave fitness {again.fitness:.4g}"
    if incumbent_again.status != "correct":
        return _against_recorded_best(ctx, best, again, incumbent_again)
    margin = noise(again, incumbent_again)
    if split and split[0] == "mixed":
        return False, f"not accepted: side by side, {split[1]} (its winning bucket's part alone may pay)"
    if again.fitness <= incumbent_again.fitness * (1 + margin) and split is None:
        return False, (f"not accepted: side by side, {again.fitness:.4g} vs best {best} {incumbent_again.fitness:.4g}"
                       f" is within the noise ({margin:.1%})")
    return True, (f"accepted: new best (side by side {again.fitness:.4g} vs {best} {incumbent_again.fitness:.4g}, "
                  f"noise {margin:.1%}" + (f"; {split[1]})" if split else ")"))


def _against_recorded_best(ctx: ToolContext, best: str, again, incumbent_again) -> tuple[bool, str]:
    """The best failed its side-by-side re-run (its fitness there is 0): no side-by-side comparison exists, so the
    candidate's re-run must beat the best's recorded fitness by the noise instead, and the verdict says why. (A
    best is confirmed against only once `decide` has loaded its result as correct.)"""
    recorded = ctx.run.load_eval(best)
    bar, margin = recorded.fitness, noise(again, recorded)
    ctx.run.append_event("incumbent_failed", cid=best, status=incumbent_again.status, rule=incumbent_again.rule,
                         message=incumbent_again.message[:500])
    failed = f"the best {best} was {incumbent_again.status} on its side-by-side re-run ({incumbent_again.summary()})"
    if again.fitness <= bar * (1 + margin):
        return False, (f"not accepted: {failed}; against its recorded fitness {bar:.4g}, {again.fitness:.4g} is "
                       f"within the noise ({margin:.1%})")
    return True, (f"accepted: {failed}; the clean re-run's {again.fitness:.4g} beats its recorded fitness "
                  f"{bar:.4g} (noise {margin:.1%})")


def finish_confirmation(ctx: ToolContext) -> dict | None:
    """On resume: a candidate whose side-by-side re-run was cut short (the run was killed) is confirmed now, and
    accepted if it holds up. Returns the `confirm_end` event recorded, or None when nothing was in flight."""
    pending = None
    for event in ctx.run.events():
        if event.get("kind") == "confirm_start":
            pending = event
        elif event.get("kind") == "confirm_end" and pending is not None and event.get("cid") == pending.get("cid"):
            pending = None
    result = ctx.run.load_eval(pending["cid"]) if pending else None
    if result is None:
        return None
    cid = pending["cid"]
    if ctx.lineage.best == cid:  # accepted before the kill, only its end was not recorded
        accepted, verdict = True, "accepted before the run was stopped"
    else:
        with procs.temp_dir("candidate") as tmp:
            ctx.lineage.checkout(cid, Path(tmp))
            accepted, verdict = decide(ctx, cid, result, Path(tmp))
        if accepted:
            ctx.lineage.accept(cid)
            ctx.state.since_improvement = 0
    event = {"cid": cid, "accepted": accepted, "verdict": verdict, "resumed": True}
    ctx.run.append_event("confirm_end", **event)
    ctx.state.last_confirm = None
    return event


def report(ctx: ToolContext, cid: str, parent, result, *, accepted: bool, duplicate_of, verdict: str) -> dict:
    best = ctx.lineage.best
    best_result = ctx.run.load_eval(best) if best else None
    return {
        "cid": cid, "parent": parent,
        "status": result.status if result else None,
        "rule": result.rule if result else None,
        "message": (result.message[:MAX_MESSAGE_CHARS] if result else ""),
        "fitness": result.fitness if result else 0.0,
        "accepted": accepted, "verdict": verdict,
        "best_cid": best, "best_fitness": best_result.fitness if best_result else 0.0,
        "duplicate_of": duplicate_of,
        "suspicious": bool(result and result.suspicious),
        "timing_source": result.timing_source if result else "none",
        "worker": result.placement() if result else "",
        "cases": [c.model_dump(mode="json") for c in result.cases] if result else [],
        "buckets": bucket_table(result, best_result),
    }


def bucket_table(result, best_result) -> dict[str, list[float]]:
    """bucket -> [its fitness in this result, in the best's] where the kernel has a per-shape table (the heuristic
    agent tunes each bucket from these)."""
    if result is None or not result.ok:
        return {}
    best = best_result if best_result is not None and best_result.ok else None
    return {b: [result.weighted_fitness(b), best.weighted_fitness(b) if best else 0.0] for b in result.buckets()}


def render(cid: str, parent, result, verdict: str, data: dict) -> str:
    lines = [f"{cid} (parent {parent or '-'}): {result.summary()}"]
    if result.placement():
        lines.append(f"scored on {result.placement()}")
    if result.rule:
        lines.append(f"rule: {result.rule}")
    if result.status != "correct" and result.message.strip():
        lines.append(data["message"].rstrip())
    lines.append(verdict)
    lines.append(f"best: {data['best_cid'] or '-'} fitness {data['best_fitness']:.4g}")
    timed = result.bench_cases()
    if timed:
        source = result.timing_source
        lines.append(f"{'case':28} {'ms':>9} {'lib ms':>9} {'TFLOPS':>8} {'speedup':>8}  [{source}]")
        for c in timed:
            lines.append(f"{c.case[:28]:28} {fmt(c.ms)} {fmt(c.library_ms)} {fmt(c.tflops, 8, 1)} "
                         f"{fmt(c.speedup, 8, 3)}" + (f"  bucket {c.bucket}" if c.bucket else ""))
    for bucket, (mine, best) in data.get("buckets", {}).items():
        lines.append(f"bucket {bucket}: fitness {mine:.4g} (best {best:.4g})")
    failed = [c for c in result.cases if c.correct is False]
    for c in failed[:5]:
        lines.append(f"FAILED {c.case}: rel_err {c.rel_err} (tolerance {c.tolerance}) {c.message[:200]}")
    # The evaluator's notes: what compiled on first launch, a host-bound wrapper, ptxas serializing a kernel's wgmma.
    lines += [f"note: {note[:MAX_NOTE_CHARS]}" for note in result.notes[:MAX_NOTES]]
    return "\n".join(lines)


def fmt(value, width: int = 9, digits: int = 4) -> str:
    return number(value, f"{width}.{digits}f", none=f"{'-':>{width}}")
