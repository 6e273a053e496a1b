"""Which sizes of a KernelBench problem to run: knob values, a second size for the check suite, and a size small
enough for the Triton interpreter. Every size is measured on the meta device before it is offered."""

from __future__ import annotations

from typing import Any


def knob_size(value: Any) -> int:
    """An int knob's value, or the largest entry of a tuple-of-ints knob (`input_shape = (4096, 8)`); 0 otherwise."""
    def whole(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 1

    if whole(value):
        return value
    if isinstance(value, tuple) and value and all(whole(v) for v in value):
        return max(value)
    return 0


def _each(value: Any, fn: Any) -> Any:
    return tuple(fn(v) for v in value) if isinstance(value, tuple) else fn(value)


def _halve_largest(value: Any) -> Any:
    if not isinstance(value, tuple):
        return (value + 1) // 2
    i = value.index(max(value))
    return value[:i] + ((value[i] + 1) // 2,) + value[i + 1:]


def format_size(value: Any) -> str:
    return "x".join(map(str, value)) if isinstance(value, tuple) else str(value)


RAGGED_TILES = (64, 128)
"""Block sizes a kernel is likely to assume divide its sizes: a ragged size is a multiple of none of them."""


def _three_quarters(n: int) -> int:
    return max(8, (n * 3 // 4) // 8 * 8) if n >= 16 else n


def _ragged(n: int) -> int:
    """Three quarters, then 8 less where that is a multiple of 64: still a multiple of 8 (16-byte vectors of 16-bit
    elements stay legal) but of no usual block size, so a kernel whose last block is not masked fails."""
    m = _three_quarters(n)
    return m - 8 if n >= 16 and m > 8 and any(m % t == 0 for t in RAGGED_TILES) else m


def second_sizes(sizes: dict[str, Any]) -> list[dict[str, Any]]:
    """Other sizes worth checking, best first: about three quarters with no knob a multiple of 64 (ragged), three
    quarters (multiples of 8), then half."""
    ragged = {k: _each(v, _ragged) for k, v in sizes.items()}
    three_quarters = {k: _each(v, _three_quarters) for k, v in sizes.items()}
    half = {k: _each(v, lambda n: max(1, n // 2)) for k, v in sizes.items()}
    found: list[dict[str, Any]] = []
    for s in (ragged, three_quarters, half):
        if s != sizes and s not in found:
            found.append(s)
    return found


def downsized(problem: Any, sizes: dict[str, Any], dtype: Any, budget: int) -> dict[str, Any]:
    """Halve the largest knob (or, if the model breaks, all of them) until the problem's elements fit `budget`;
    a knob that cannot move either way stays put."""
    current = dict(sizes)
    best = problem.try_measure(current, dtype)
    frozen: set[str] = set()
    while best is not None and best.elements > budget:
        movable = [k for k in current if k not in frozen and knob_size(current[k]) > 1]
        if not movable:
            break
        knob = max(movable, key=lambda k: knob_size(current[k]))
        trial = {**current, knob: _halve_largest(current[knob])}
        measured = problem.try_measure(trial, dtype)
        if measured is None:  # some knobs only move together (a shape two inputs share): try all at once
            trial = {**current, **{k: _halve_largest(current[k]) for k in movable}}
            measured = problem.try_measure(trial, dtype)
        if measured is None:
            frozen.add(knob)
        else:
            current, best = trial, measured
    return current
