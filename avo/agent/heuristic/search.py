"""Which knob setting to try next: best-first coordinate descent around the incumbent, then pairwise moves.

From the incumbent (the best accepted point) every one-step change of one knob is a move; a move that would not fit
(shared memory, accumulator registers) is repaired by the knob that usually pays for it (fewer stages, more warps),
or dropped. Moves are ranked by the gain the rule model expects (sharpened by profile facts), with a bonus for
continuing in the direction that was last accepted and for pairing a near-miss with a change measured alone (an
unmeasured change is tried alone first); known-good configurations for the GPU are offered as one jump. Once no
one-knob move is expected to gain, two-knob moves join the ranking; when no move is left, the search widens
(widen.py), and it is over once that has none either. A point is never tried twice, whatever its outcome, and a
shared-memory failure lowers the shared-memory bound for every later point. Measurement beats the model: a move that
makes again every change of a set that lost when measured (from any incumbent), or that undoes a change that was
accepted for a measured gain, is expected to lose as much, so it waits until no other move promises a gain.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Callable

from avo.agent.heuristic import blackwell, widen
from avo.agent.heuristic.knobs import Knob, Point, Value, bucket_of, point_key
from avo.agent.heuristic.measured import HELD_LOSS
from avo.agent.heuristic.rules import (Facts, Shape, accumulator_registers, infeasible, roles, smem_bytes,
                                       smem_failure)
from avo.agent.heuristic.speed import Estimate, estimate

PRESETS: dict[str, list[tuple[str, dict[str, int]]]] = {
    "gemm": [
        ("H200 GEMM anchor 128x256x64, 8 warps, 3 stages (plain Triton ~0.8x cuBLAS)",
         {"bm": 128, "bn": 256, "bk": 64, "warps": 8, "stages": 3, "group": 8}),
        ("square 128x128x64 tile, 8 warps, 4 stages",
         {"bm": 128, "bn": 128, "bk": 64, "warps": 8, "stages": 4, "group": 8}),
    ],
    "attention": [
        ("FA2-style 128x64 tile, 8 warps, 3 stages (the fa2 seed's former default: 0.74x cuDNN on H200)",
         {"bm": 128, "bn": 64, "warps": 8, "stages": 3}),
        ("FA2-style 128x128 tile, 8 warps, 3 stages (the fa2 seed's default: 0.75x cuDNN on H200)",
         {"bm": 128, "bn": 128, "warps": 8, "stages": 3}),
    ],
}

NEAR_MISS = 1.0 - HELD_LOSS
"""A correct point within 1% of the incumbent that was not accepted may pay in combination; one further below is a
measured loss (measured.HELD_LOSS), held back instead."""


@dataclass
class Trial:
    point: Point
    status: str
    fitness: float = 0.0
    accepted: bool = False
    cid: str | None = None
    message: str = ""


@dataclass
class Move:
    point: Point
    changes: dict[str, tuple[Value, Value]]
    estimate: Estimate
    kind: str
    """'single', 'preset', 'pair', 'split', or past the neighbourhood 'combined' or 'far'."""
    score: float = 0.0
    label: str = ""

    @cached_property
    def key(self) -> tuple:
        """point_key(point), read for every ranking and every check of whether the point was tried: made once."""
        return point_key(self.point)

    def describe(self) -> str:
        changed = ", ".join(f"{k} {a} -> {b}" for k, (a, b) in self.changes.items())
        lead = f"{self.label}: {changed}" if self.label else changed
        return f"{lead}: {self.estimate.reason}; expect {self.estimate.gain:+.0%}"


@dataclass
class Search:
    knobs: list[Knob]
    shape: Shape
    incumbent: Point
    incumbent_fitness: float = 0.0
    trials: dict[tuple, Trial] = field(default_factory=dict)
    facts: Facts | None = None
    last_accepted: dict[str, tuple[Value, Value]] = field(default_factory=dict)
    smem_cap: int | None = None
    seed: int = 0
    renders: Callable[[Point], bool] | None = None
    """Whether a point can be written into the kernel (a choice that would not parse is never offered)."""
    losses: dict[frozenset, float] = field(default_factory=dict)
    """Set of (knob, before, after) changes -> relative fitness they lost when measured (see `change_losses`)."""
    splits: list[tuple[dict[str, Value], str, float]] = field(default_factory=list)
    """(changes, bucket, gain): the winning bucket's part of a move that cost another bucket (`winning_parts`)."""
    buckets: list[str] = field(default_factory=list)
    """The table entries the timed cases take: a shared knob's change must fit in each of them."""
    head_dims: dict[str, int] = field(default_factory=dict)
    """bucket -> the head dim its entry serves (attention: the kernel's rule says); the whole kernel is read at
    shape.head_dim."""
    _bucket_roles: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)
    _memo: dict | None = field(default=None, repr=False)
    _ties: dict[tuple, str] = field(default_factory=dict, repr=False)

    @property
    def by_name(self) -> dict[str, Knob]:
        return {k.name: k for k in self.knobs}

    def record(self, trial: Trial) -> None:
        """Remember an outcome; a shared-memory failure also bounds every later point. Where the compiler said how
        much it required and what the limit is, that calibrates the model instead: its count per element (fp32
        operands take twice the model's 2 bytes) and the limit in the compiler's bytes."""
        key = point_key(trial.point)
        self.trials[key] = trial
        if trial.status != "correct" and smem_failure(trial.message):
            counted = _required_smem(trial.message)
            need = smem_bytes(self.shape, trial.point)
            if counted is None:
                self.smem_cap = min(self.smem_cap or need, need - 1)
                return
            required, limit = counted
            ratio = required / max(need / self.shape.smem_scale, 1)
            if ratio > 1.0:  # the smallest ratio seen: the model errs towards trying a point, not skipping it
                self.shape.smem_scale = ratio if self.shape.smem_scale == 1.0 else min(self.shape.smem_scale, ratio)
            self.smem_cap = min(self.smem_cap or limit, limit)

    def tried(self, point: Point) -> bool:
        return point_key(point) in self.trials

    def next_move(self) -> Move | None:
        """The most promising untried move. Two-knob moves join once no one-knob move is expected to gain (each
        dimension has been pushed as far as it pays), so a promising pair goes before the unpromising singles; at
        equal promise the move of fewer changes goes first. The winning bucket's part of a move that helped one
        bucket and cost another goes first: it was measured. Once every one- and two-knob step has been measured,
        the search widens (heuristic/widen.py)."""
        moves = self._splits() + self._singles() + self._presets()
        if not moves or max(m.score for m in moves) <= 0:
            moves += self._pairs()
        if not moves:  # every step around the best measured: the near misses together, then values further away
            moves = widen.combined(self) or widen.far_singles(self)
        if not moves:
            return None

        def rank(m: Move) -> tuple[float, int]:
            return -m.score, len(m.changes)

        first = min(map(rank, moves))  # the seed's tie-break (a sha256 each) only among the moves tied first
        return min((m for m in moves if rank(m) == first), key=self._jitter)

    def _jitter(self, move: Move) -> str:
        if move.key not in self._ties:  # a point is ranked again at every pick of next_moves: hash it once
            self._ties[move.key] = _jitter(self.seed, move.point)
        return self._ties[move.key]

    def next_moves(self, count: int) -> list[Move]:
        """Up to `count` moves, each the one `next_move` would give were the ones before it tried with no outcome
        known yet: what one worker would try next, one after another, if none of these results changed the
        ranking (a new best, a measured loss or a shared-memory failure do change it)."""
        known = dict(self.trials)
        moves: list[Move] = []
        self._memo = {}
        try:
            while len(moves) < count:
                move = self.next_move()
                if move is None:
                    break
                moves.append(move)
                self.trials[move.key] = Trial(point=move.point, status="pending")
        finally:
            self.trials, self._memo = known, None
        return moves

    def _candidate(self, changes: dict[str, Value], kind: str, label: str = "") -> Move | None:
        """The move making `changes` (repaired to fit), or None where it cannot be made or its point was tried.
        Within next_moves each is built once: only the points tried change from one pick to the next."""
        key = (tuple(sorted(changes.items())), kind, label)
        if self._memo is not None and key in self._memo:
            move = self._memo[key]
        else:
            move = self._build(changes, kind, label)
            if self._memo is not None:
                self._memo[key] = move
        return None if move is None or move.key in self.trials else move

    def _build(self, changes: dict[str, Value], kind: str, label: str) -> Move | None:
        point = dict(self.incumbent)
        point.update(changes)
        shape = self.shape_of(changes)
        point = self._repair(point, set(changes), shape)
        if point is None or point == self.incumbent:
            return None
        if any(infeasible(other, point, self.smem_cap) for other in self._also_checked(point)):
            return None
        if self.renders is not None and not self.renders(point):
            return None
        est = estimate(shape, self.incumbent, point, self.facts)
        diff = {k: (self.incumbent[k], v) for k, v in point.items() if self.incumbent.get(k) != v}
        move = Move(point=point, changes=diff, estimate=est, kind=kind, label=label)
        made = {(k, a, b) for k, (a, b) in diff.items()}
        lost = max((loss for changes, loss in self.losses.items() if changes <= made), default=0.0)
        move.score = est.gain + self._bonus(diff)
        if lost > 0:  # measured beats modelled: expect the loss again, so it waits until nothing promises a gain
            move.score = min(move.score, -lost)
            est.reason += f"; the same change lost {lost:.0%} when measured before"
        return move

    def shape_of(self, changes) -> Shape:
        """How to read a move: with the roles of its bucket's table entry (and the shared knobs) where every knob it
        sets belongs to one bucket; else as the whole kernel."""
        buckets = {bucket_of(name) for name in changes} - {None}
        if len(buckets) != 1:
            return self.shape
        (bucket,) = buckets
        return self.bucket_shape(bucket)

    def bucket_shape(self, bucket: str) -> Shape:
        """The kernel read as one table entry: that entry's knobs in their roles, the shared knobs in the rest."""
        if bucket not in self._bucket_roles:  # the knobs do not change during a search: read each entry once
            self._bucket_roles[bucket] = roles([k for k in self.knobs if k.bucket in (None, bucket)], bucket)
        return replace(self.shape, roles=self._bucket_roles[bucket],
                       head_dim=self.head_dims.get(bucket, self.shape.head_dim))

    def _also_checked(self, point: Point) -> list[Shape]:
        """The readings a point must also fit under: where it changes a shared knob, the whole kernel's and each
        timed table entry's (a shared STAGES serves every entry, so it must fit beside each entry's own tile)."""
        if not any(bucket_of(k) is None and self.incumbent.get(k) != v for k, v in point.items()):
            return []
        return [self.shape, *(self.bucket_shape(b) for b in self.buckets)]

    def _splits(self) -> list[Move]:
        moves = []
        for changes, bucket, gain in self.splits:
            move = self._candidate(changes, "split", f"the {bucket} bucket's part alone")
            if move is not None:
                move.score = max(move.score, 1.0 + gain)  # measured, not modelled
                move.estimate.reason = f"it gained {gain:.0%} on the {bucket} bucket when measured with the rest"
                moves.append(move)
        return moves

    def _singles(self) -> list[Move]:
        moves: dict[tuple, Move] = {}
        for knob in self.knobs:
            for value in knob.neighbours(self.incumbent.get(knob.name, knob.value)):
                move = self._candidate({knob.name: value}, "single")
                if move is not None:
                    moves.setdefault(move.key, move)
        return list(moves.values())

    def _presets(self) -> list[Move]:
        if "consumers" in self.shape.fixed:
            return []  # the presets are tiles of plain Triton kernels; a warp-specialized seed ships measured ones
        moves = []
        presets = blackwell.PRESETS if blackwell.is_blackwell(self.shape.arch) else PRESETS
        for label, targets in presets.get(self.shape.kind, []):
            changes = {}
            for role, target in targets.items():
                name = self.shape.roles.get(role)
                if name is not None:
                    changes[name] = _nearest(self.by_name[name].choices, target)
            if sum(self.incumbent.get(k) != v for k, v in changes.items()) < 2:
                continue  # a single move covers it
            move = self._candidate(changes, "preset", label)
            if move is not None:
                moves.append(move)
        return moves

    def _pairs(self) -> list[Move]:
        """Every two-knob step not tried. Within next_moves the list is built once and only filtered at each pick:
        a kernel with many knobs has thousands of pairs."""
        if self._memo is not None and "pairs" in self._memo:
            moves = self._memo["pairs"]
        else:
            moves = self._all_pairs()
            if self._memo is not None:
                self._memo["pairs"] = moves
        return [m for m in moves if m.key not in self.trials]

    def _all_pairs(self) -> list[Move]:
        """Every two-knob step that can be made, tried or not, one move per point."""
        steps = [(k.name, v) for k in self.knobs for v in k.neighbours(self.incumbent.get(k.name, k.value))]
        moves: dict[tuple, Move] = {}
        for (a, va), (b, vb) in itertools.combinations(steps, 2):
            if a == b:
                continue
            move = self._build({a: va, b: vb}, "pair", "")
            if move is not None:
                moves.setdefault(move.key, move)
        return list(moves.values())

    def _repair(self, point: Point, fixed: set[str], shape: Shape | None = None) -> Point | None:
        """Make a point fit by the knobs the move did not set: fewer stages for shared memory (or, where the move
        set them, C stored in more epilogue slices), more warps for registers. None when it cannot be made to fit."""
        shape = shape or self.shape
        stages, warps = shape.roles.get("stages"), shape.roles.get("warps")
        split = shape.roles.get("epilogue_split")

        def fits(p: Point) -> bool:
            return not infeasible(shape, p, self.smem_cap)

        def registers_fit(p: Point) -> bool:
            return accumulator_registers(shape, p) <= 128

        if warps and warps not in fixed and not registers_fit(point):
            point = _step_until(point, warps, _numeric_choices(self.by_name[warps], above=point[warps]), registers_fit)
        if stages and stages not in fixed and not fits(point):
            point = _step_until(point, stages, reversed(_numeric_choices(self.by_name[stages], below=point[stages])),
                                fits)
        if split and split not in fixed and not fits(point):
            point = _step_until(point, split, _numeric_choices(self.by_name[split], above=point[split]), fits)
        return point if fits(point) else None

    def _bonus(self, diff: dict[str, tuple[Value, Value]]) -> float:
        bonus = 0.0
        for name, (before, after) in diff.items():
            if name in self.last_accepted:
                prev_before, prev_after = self.last_accepted[name]
                if _direction(prev_before, prev_after) == _direction(before, after) != 0:
                    bonus += 0.03  # it paid last time: keep going
        for trial in self.trials.values():
            if trial.status == "correct" and not trial.accepted and self.incumbent_fitness > 0 \
                    and trial.fitness >= NEAR_MISS * self.incumbent_fitness:
                near = {k: v for k, v in trial.point.items() if self.incumbent.get(k) != v}
                if near and all(diff.get(k, (None, None))[1] == v for k, v in near.items()) and len(diff) > len(near) \
                        and all(self.tried(dict(self.incumbent, **{k: after}))
                                for k, (_, after) in diff.items() if k not in near):
                    bonus += 0.02  # a near miss with a partner measured alone; an untried partner goes alone first
        return bonus


def _required_smem(message: str) -> tuple[int, int] | None:
    """(required, hardware limit) from Triton's OutOfResources message, or None if it does not say."""
    found = re.search(r"Required:\s*(\d+),\s*Hardware limit:\s*(\d+)", message or "") \
        or re.search(r"need (\d+) bytes of shared memory.*?over (\d+)", message or "")  # a CUDA seed's own check
    return (int(found.group(1)), int(found.group(2))) if found else None


def _nearest(choices: tuple[Value, ...], target: int) -> Value:
    numeric = [c for c in choices if isinstance(c, (int, float)) and not isinstance(c, bool)]
    if not numeric:
        return choices[0]
    return min(numeric, key=lambda c: (abs(c - target), c))


def _step_until(point: Point, name: str, values, done) -> Point:
    """`point` with knob `name` set to each of `values` in turn until `done` holds for it (or to the last)."""
    for value in values:
        point = dict(point, **{name: value})
        if done(point):
            break
    return point


def _numeric_choices(knob: Knob, above: Value | None = None, below: Value | None = None) -> list[Value]:
    values = sorted(c for c in knob.choices if isinstance(c, (int, float)) and not isinstance(c, bool))
    if any(isinstance(v, (bool, str)) for v in (above, below)):
        return []
    if above is not None:
        values = [v for v in values if v > above]
    if below is not None:
        values = [v for v in values if v < below]
    return values


def _direction(before: Value, after: Value) -> int:
    try:
        return (float(after) > float(before)) - (float(after) < float(before))
    except (TypeError, ValueError):
        return 0


def _jitter(seed: int, point: Point) -> str:
    """Deterministic tie-break that depends on the seed (never Python's randomized str hash)."""
    return hashlib.sha256(f"{seed}:{sorted(point.items())!r}".encode()).hexdigest()
