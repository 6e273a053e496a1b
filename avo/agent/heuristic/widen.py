"""Moves past the neighbourhood of the best, for when every single and pairwise step around it has been measured.

A seed already tuned for a workload sits in a local optimum of one-step moves: on the H200, an evolve of the CUDA
attention seed for a model's shapes measured all 27 of them in under four minutes, five within the noise above the
best (+0.1% to +0.4%) and none beyond it, and stopped. Two ways on from there, both still moves of knobs:

- the near misses together: changes that each gained within the noise when measured alone, made at once (the
  larger first). Where they touch different table entries or independent parts of the kernel their gains add, and
  the sum can clear a noise that each alone could not; acceptance still measures the result side by side;
- far single moves: a knob set to a value more than one step away (BLOCK_N 128 -> 192 where 160 lost), for a
  landscape that is not one smooth hill.

Each move is a point the search has not measured; the search still ends once none is left.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from avo.agent.heuristic.search import Move, Search

MAX_COMBINED = 6
"""Near misses made at once, at most (the larger first)."""


def combined(search: Search) -> list[Move]:
    """The measured near misses above the best's fitness, made together: the two largest, the three largest, ...
    (a miss that conflicts with a larger one, by setting a knob it sets otherwise, is skipped)."""
    base = search.incumbent_fitness
    if base <= 0:
        return []
    misses = sorted((t for t in search.trials.values() if t.status == "correct" and not t.accepted
                     and t.fitness > base), key=lambda t: -t.fitness)
    changes: dict = {}
    gains: list[float] = []
    moves = []
    for trial in misses:
        diff = {k: v for k, v in trial.point.items() if search.incumbent.get(k) != v}
        if not diff or any(k in changes and changes[k] != v for k, v in diff.items()) \
                or all(changes.get(k) == v for k, v in diff.items()):
            continue  # the best itself, a conflict, or already inside the union
        changes.update(diff)
        gains.append(trial.fitness / base - 1.0)
        if len(gains) >= 2:
            move = search._candidate(dict(changes), "combined", f"{len(gains)} near misses together")
            if move is not None:
                move.score = sum(gains)
                move.estimate.reason = (f"each gained {', '.join(f'{g:+.1%}' for g in gains)} alone, within the "
                                        f"noise; together {sum(gains):+.1%} if their gains add")
                moves.append(move)
        if len(gains) >= MAX_COMBINED:
            break
    return moves


def far_singles(search: Search) -> list[Move]:
    """Every knob set to each value more than one step from the best's, ranked by the speed model."""
    moves = {}
    for knob in search.knobs:
        current = search.incumbent.get(knob.name, knob.value)
        near = knob.neighbours(current)
        for value in knob.choices:
            if type(value) is type(current) and value == current or any(
                    type(value) is type(n) and value == n for n in near):
                continue
            move = search._candidate({knob.name: value}, "far", "a value further away")
            if move is not None:
                moves.setdefault(move.key, move)
    return list(moves.values())
