"""What measurements say about knob changes: the loss a set of changes brought when measured (a later move that
makes them again is expected to lose as much), and the winning bucket's part of a move that helped one shape bucket
and cost another (tried alone next). Both walk the outcomes in order, the incumbent advancing on each accepted one.
"""

from __future__ import annotations

from avo.agent.heuristic.knobs import Knob, Value, base_name, bucket_of
from avo.agent.heuristic.rules import smem_failure

MIN_LOSS = 0.02
"""A measured gain or a bucket's loss smaller than this is noise, not evidence (see change_losses, winning_parts)."""
HELD_LOSS = 0.01
"""A point not accepted that scored more than this below its incumbent (past a near miss, which may pay beside
another change) was measured to lose: a later move that makes its changes again is held back. On the H200 a GEMM
move the rules expected to gain (MMA_LAG) lost 1.9%, under MIN_LOSS, and the search then paired it with each of 23
other knobs, every pair lower than the baseline, before it tried those knobs alone."""


def change_losses(outcomes: list) -> dict[frozenset, float]:
    """What knob changes cost when they were measured: walking the outcomes in order (each with .point, .status,
    .fitness, .accepted; the first correct one is the baseline), a correct point that scored below the incumbent of
    its time by more than HELD_LOSS records its relative loss under the set of changes that made it; an accepted point
    that gained more than MIN_LOSS records, under the changes that undo it, the loss of going back; a point that failed
    records a loss of 1 under its changes. A later move that makes all of the changes of a set again (from any
    incumbent) is held back by it; the largest such loss counts."""
    losses: dict[frozenset, float] = {}

    def note(changes: list, loss: float) -> None:
        key = frozenset(changes)
        losses[key] = max(losses.get(key, 0.0), loss)

    for o, incumbent, best in _walk(outcomes):
        changed = [(k, incumbent.get(k), v) for k, v in o.point.items() if incumbent.get(k) != v]
        fitness, best = _own_bucket(o, changed, best)
        if o.accepted:
            if changed and best > 0 and fitness > best * (1.0 + MIN_LOSS):
                note([(k, after, before) for k, before, after in changed], 1.0 - best / fitness)
            continue
        if best > 0 and changed and fitness < best * (1.0 - HELD_LOSS):
            note(changed, 1.0 - fitness / best)
    for o, incumbent in _failures(outcomes):  # a change that broke the kernel loses everything, made again
        changed = [(k, incumbent.get(k), v) for k, v in o.point.items() if incumbent.get(k) != v]
        if changed:
            note(changed, 1.0)
    return losses


def _failures(outcomes: list):
    """(outcome, incumbent point of its time) for each outcome that failed (did not compile, crashed, timed out,
    was wrong or rejected) after the baseline: on the H200 a cluster size the seed cannot build was tried again
    beside eight other knobs' moves, each a compile error. Out of shared memory is left out: the search's bound,
    calibrated by it, says where instead."""
    for o, incumbent, _ in _history(outcomes):
        if o.status not in ("correct", "pending") and not smem_failure(o.message):
            yield o, incumbent


def _walk(outcomes: list):
    """(outcome, incumbent point, incumbent fitness) for each correct outcome after the first (the baseline), the
    incumbent advancing on every accepted one."""
    return ((o, i, best) for o, i, best in _history(outcomes) if o.status == "correct")


def _history(outcomes: list):
    """(outcome, incumbent point, incumbent fitness) for each outcome with a point after the baseline (the first
    correct one), the incumbent advancing on every accepted correct one."""
    incumbent, best = None, 0.0
    for o in outcomes:
        if o.point is None:
            continue
        if incumbent is not None:
            yield o, incumbent, best
        if o.status == "correct" and (incumbent is None or o.accepted):
            incumbent, best = o.point, o.fitness


def _own_bucket(o, changed: list, best: float) -> tuple[float, float]:
    """(fitness, incumbent's) to judge a change by: those of its bucket's cases where it only set one bucket's
    knobs and its result says (a bucket is tuned from its own cases); else the whole fitness."""
    buckets = {bucket_of(k) for k, _, _ in changed}
    table = getattr(o, "buckets", None) or {}
    if len(buckets) == 1 and None not in buckets and buckets <= set(table) and not o.accepted:
        mine, theirs = table[buckets.pop()]
        return mine, theirs
    return o.fitness, best


def winning_parts(outcomes: list, knobs: list[Knob]) -> list[tuple[dict[str, Value], str, float]]:
    """For each move that was not accepted because it helped one bucket and cost another (each by more than
    MIN_LOSS on its own cases): its changes to the winning bucket's knobs alone, a shared knob's change carried to
    the bucket's own knob of that name where there is one; with the bucket and its measured gain."""
    by_name = {k.name: k for k in knobs}
    parts = []
    for o, incumbent, _ in _walk(outcomes):
        table = getattr(o, "buckets", None) or {}
        if o.accepted or len(table) < 2:
            continue
        change = {b: mine / theirs - 1.0 for b, (mine, theirs) in table.items() if theirs > 0}
        if not any(c < -MIN_LOSS for c in change.values()):
            continue
        changed = {k: v for k, v in o.point.items() if incumbent.get(k) != v}
        for bucket, gain in change.items():
            if gain <= MIN_LOSS:
                continue
            part = {}
            for name, value in changed.items():
                own = name if bucket_of(name) == bucket else f"{base_name(name)}@{bucket}" \
                    if bucket_of(name) is None else None
                if own in by_name and value in by_name[own].choices:
                    part[own] = value
            if part:
                parts.append((part, bucket, gain))
    return parts
