"""Which sizes of a KernelBench problem to run: knob values, a second size for the check suite, and a size small
enough for the Triton interpreter. Every size is measured on the meta device before it is offered."""

from __future__ import annotations

from typing import Any


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def knob_size(value: Any) -> int:
    """An int knob's value, or the largest entry of a tuple- or list-of-ints knob (`input_shape = (4096, 8)`,
    `layer_sizes = [400, 800]`); 0 otherwise."""
    if _whole(value):
        return value
    if isinstance(value, tuple | list) and value and all(_whole(v) for v in value):
        return max(value)
    return 0


def _each(value: Any, fn: Any) -> Any:
    return type(value)(fn(v) for v in value) if isinstance(value, tuple | list) else fn(value)


def _halve_largest(value: Any) -> Any:
    if not isinstance(value, tuple | list):
        return max(COUNT_FLOOR, (value + 1) // 2)
    i = value.index(max(value))
    return value[:i] + type(value)([max(COUNT_FLOOR, (value[i] + 1) // 2)]) + value[i + 1:]


def format_size(value: Any) -> str:
    return "x".join(map(str, value)) if isinstance(value, tuple | list) else str(value)


COUNT_FLOOR = 2
"""Downsizing leaves a knob of the file's at 2 at the least."""
MIN_SAVING = 0.125
"""A halving that saves less than this share of the elements is not worth the smaller problem."""
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


def ragged_small(n: int) -> int:
    """n, or 8 less where n is a multiple of 16: a product of two such knobs is no multiple of 128, so a flattened
    kernel whose last block (of 128 or more) is not masked fails."""
    return n - 8 if n >= 16 and n % 16 == 0 else n


def ones(sizes: dict[str, Any]) -> dict[str, Any]:
    """Every knob at 1 (every entry of a tuple or list knob)."""
    return {k: _each(v, lambda n: 1) for k, v in sizes.items()}


def downsized(problem: Any, sizes: dict[str, Any], dtype: Any, budget: int) -> dict[str, Any]:
    """Halve the largest knob (or, if the model breaks, all of them) until the problem's elements fit `budget`, then
    make the knobs ragged (`ragged_small`) where the model allows. A knob stays put once it cannot move either way,
    once a halving saves under MIN_SAVING of the elements (the rest is the model's own: LeNet-5's fixed layers), and
    at COUNT_FLOOR (a batch or class count of 1 hides indexing bugs); the result may then exceed `budget`."""
    current = dict(sizes)
    best = problem.try_measure(current, dtype)
    frozen: set[str] = set()
    while best is not None and best.elements > budget:
        movable = [k for k in current if k not in frozen and knob_size(current[k]) > COUNT_FLOOR]
        if not movable:
            break
        knob = max(movable, key=lambda k: knob_size(current[k]))
        trial = {**current, knob: _halve_largest(current[knob])}
        measured = problem.try_measure(trial, dtype)
        if measured is None:  # some knobs only move together (a shape two inputs share): try all at once
            trial = {**current, **{k: _halve_largest(current[k]) for k in movable}}
            measured = problem.try_measure(trial, dtype)
        if measured is None or best.elements - measured.elements < MIN_SAVING * best.elements:
            frozen.add(knob)
        else:
            current, best = trial, measured
    ragged = {k: _each(v, ragged_small) for k, v in current.items()}
    if ragged != current and best is not None and problem.try_measure(ragged, dtype) is not None:
        return ragged
    return current
