"""Timing of several contenders (candidate, library, incumbent) interleaved in one process.

On a GPU every call is timed with CUDA events on the current stream, after an L2 flush, on inputs the caller
prepares fresh for that call (outside the clock). A device-wide synchronize follows each call, and a third event
recorded after it measures how long the device stayed busy past the end event: work hidden on a side stream shows up
there (`sync_gap_ms`). With a launch shield, a short spin kernel is queued between the flush and the start event, so
the host's launch work for the call (Python wrappers, Triton's launcher) happens while the device is still busy and
never lands between the start event and the kernel; the shield is lengthened for a case whose contenders' launch
work takes longer (SHIELD_FIT times the 90th percentile of their host time per call in the warm-up). The spin holds
every SM's thread slots, and the call starts only once the flush before it has finished, so no work of the call's
can hide under it on another stream (worker/hold.py). Contenders
alternate call by call, in rounds whose order flips every other round, so clock, power and thermal drift hit all of
them alike; a contender's time is the median of its per-round medians. Rounds stop early (at `min_rounds`, then
after each round) once the standard error of what is estimated is at most `target_error`: with a `paired_with`
contender (the library), each other contender's ratio to it, from the per-round ratios (a round's clock and power
state is common to both, so the ratio is steadier than either time); else each contender's own time. A steady case
needs no more rounds, a noisy one gets all of them.

Under the Triton interpreter (and on the CPU) calls are timed with the wall clock; those times say nothing about GPU
performance and are labelled "interpreter" wherever they appear.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

# Bound before any candidate is imported, so a candidate that patches `time` cannot change what the clock reads.
_perf_counter = time.perf_counter

GPU_ROUNDS = 5
INTERPRETER_ROUNDS = 3
MIN_CALLS_PER_BLOCK = 1
"""Calls per contender per round at least; `rep_ms` sets more for short calls (a 30 ms call is timed once a round)."""
MAX_CALLS_PER_BLOCK = 200
SPIN_CYCLES_PER_US = 2000
"""Spin-kernel cycles per microsecond of launch shield (about the top SM clock of H100/H200/B200, 1.98 GHz)."""
SHIELD_FIT = 1.5
"""The launch shield of a case is at least this many times the slowest contender's 90th-percentile host time per call
in the warm-up (its first call left out where there are more): a wrapper slower than the configured shield (on a
slow host CPU, 110 µs against 50) would otherwise have its launch work timed as the kernel's."""
SHIELD_MAX_US = 2000.0
FLUSH_FACTOR = 4
"""The flush buffer is this many times the L2 size, so one read of it evicts everything a call left there."""
SCALE_RANGE = (0.5, 2.0)
"""Each floating-point input of a timed call is its source scaled by a factor drawn from this range (the check suite
covers both ends: worker.check.CHECK_SCALES)."""


@dataclass
class Contender:
    name: str
    prepare: Callable[[int], tuple]
    """Inputs for call number i, built outside the clock (fresh content at a new address each call)."""
    run: Callable[[tuple], Any]


@dataclass
class Measurement:
    source: str
    samples_ms: list[float] = field(default_factory=list)
    round_medians_ms: list[float] = field(default_factory=list)
    sync_gaps_ms: list[float] = field(default_factory=list)
    host_us: float | None = None
    """Median host time of a call (its wrapper's launch work) in the warm-up."""
    shield_us: float | None = None
    """The launch shield the rounds ran with (the same for every contender of the case; GPU timing only)."""

    @property
    def ms(self) -> float:
        return statistics.median(self.round_medians_ms) if self.round_medians_ms else float("nan")

    @property
    def spread(self) -> float:
        """Coefficient of variation of the per-call times."""
        if len(self.samples_ms) < 2:
            return 0.0
        mean = statistics.fmean(self.samples_ms)
        return statistics.pstdev(self.samples_ms) / mean if mean > 0 else 0.0

    @property
    def error(self) -> float | None:
        """Relative standard error of `ms`, from the spread of the per-round medians (None below two rounds)."""
        n = len(self.round_medians_ms)
        if n < 2:
            return None
        mean = statistics.fmean(self.round_medians_ms)
        return statistics.stdev(self.round_medians_ms) / mean / math.sqrt(n) if mean > 0 else None

    @property
    def sync_gap_ms(self) -> float:
        return statistics.median(self.sync_gaps_ms) if self.sync_gaps_ms else 0.0


OnOutput = Callable[[str, int, tuple, Any], None]


class L2Flush:
    """Reads a buffer several times the L2 size, so no call finds its operands (or its output) still cached.

    A read, not a write: a written buffer leaves L2 full of dirty lines, and the timed call's first misses then
    write them back to DRAM inside its window (on an H100, 64 x 8192 x 8192 in bf16 read 58.6 µs after a written
    flush and 49.7 after a read one, cuBLAS 58.2 and 48.2; Nsight Compute, which invalidates L2, measured 48-53:
    BENCHMARKS.md). After a read L2 holds clean lines of this buffer only, and the write-backs of what the last
    call and the inputs' preparation left dirty are done before the clock starts."""

    def __init__(self, l2_bytes: int, device: str = "cuda"):
        import torch

        self.buffer = torch.ones(max(1, FLUSH_FACTOR * l2_bytes // 4), dtype=torch.int32, device=device)
        self.result = torch.zeros(1, dtype=torch.int32, device=device)
        self._amax = torch.amax  # a reduction that keeps up with DRAM (an int64 sum does not)

    def __call__(self) -> None:
        self._amax(self.buffer, 0, keepdim=True, out=self.result)


def time_interleaved(contenders: list[Contender], *, device: str, l2_bytes: int, warmup_ms: float, rep_ms: float,
                     on_output: OnOutput | None = None, rounds: int | None = None,
                     shield_us: float = 0.0, min_rounds: int | None = None,
                     target_error: float = 0.0, paired_with: str | None = None,
                     warmup_calls: int = 1) -> dict[str, Measurement]:
    """Time each contender interleaved with the others; `rep_ms` is the measured time per contender over all
    `rounds`, `shield_us` how long the device spins before each start event (0: no spin); the warm-up takes
    `warmup_ms` and `warmup_calls` calls per contender at least. With `target_error` > 0, timing ends after
    `min_rounds` or any later round once the standard error of what is estimated (each contender's time, or with
    `paired_with` its ratio to that contender) is at most `target_error`."""
    if device == "cuda":
        rounds = rounds or GPU_ROUNDS
        stop = _Stop(min(rounds, min_rounds or rounds), target_error, paired_with)
        warm = (warmup_ms, max(1, warmup_calls))
        return _time_gpu(contenders, l2_bytes, warm, rep_ms, on_output, rounds, shield_us, stop)
    return _time_wall(contenders, on_output, rounds or INTERPRETER_ROUNDS)


def time_as_configured(contenders: list[Contender], config: Any, *, device: str, l2_bytes: int,
                       paired_with: str | None = None, on_output: OnOutput | None = None) -> dict[str, Measurement]:
    """`time_interleaved` with an EvalConfig's timing settings (warm-up, repetitions, launch shield, early end): the
    bench stage's timing, which scripts that time configurations side by side reuse to time as the evaluator does."""
    return time_interleaved(contenders, device=device, l2_bytes=l2_bytes, warmup_ms=config.warmup_ms,
                            rep_ms=config.rep_ms, warmup_calls=config.warmup_calls, on_output=on_output,
                            shield_us=config.launch_shield_us, min_rounds=config.min_rounds,
                            target_error=config.target_error, paired_with=paired_with)


class _Counter:
    def __init__(self, contenders: list[Contender]):
        self.next = {c.name: 0 for c in contenders}

    def take(self, name: str) -> int:
        i = self.next[name]
        self.next[name] = i + 1
        return i


class LaunchShield:
    """Keeps the device busy for about `us` microseconds (a spin kernel; at lower clocks it lasts longer), every SM's
    thread slots held, so that no other stream's kernel runs under it (worker/hold.py)."""

    def __init__(self, us: float):
        self.cycles = int(us * SPIN_CYCLES_PER_US)
        self.us = us if self.cycles > 0 else 0.0
        self._spin, self._queued = None, None
        if self.cycles > 0:
            import torch

            from avo.evaluate.worker import hold

            self._spin, self._event = hold.spin, torch.cuda.Event

    def fit(self, host_us: dict[str, list[float]]) -> None:
        """Lengthen the shield (never shorten it; none stays none) to SHIELD_FIT times the slowest contender's
        90th-percentile host time per call, at most SHIELD_MAX_US."""
        if self._spin is None:
            return
        p90 = max((_quantile(t, 0.9) for t in host_us.values() if t), default=0.0)
        self.us = max(self.us, min(SHIELD_MAX_US, SHIELD_FIT * p90))
        self.cycles = int(self.us * SPIN_CYCLES_PER_US)

    def __call__(self) -> None:
        """The spin, after an event that passes once what was queued before it (the L2 flush) has finished."""
        if self._spin is not None:
            self._queued = self._event()
            self._queued.record()
            self._spin(self.cycles)

    def wait(self) -> None:
        """Until the spin holds the SMs: the call may launch nothing before, or it could run beside the spin."""
        if self._queued is not None:
            while not self._queued.query():
                pass
            self._queued = None


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class _Stop:
    min_rounds: int
    target_error: float
    paired_with: str | None = None

    def reached(self, results: dict[str, Measurement]) -> bool:
        if self.target_error <= 0 or any(len(m.round_medians_ms) < self.min_rounds for m in results.values()):
            return False
        base = results.get(self.paired_with) if self.paired_with else None
        if base is None:
            errors = [m.error for m in results.values()]
        else:
            errors = [ratio_error(m, base) for name, m in results.items() if name != self.paired_with]
        return all(e is not None and e <= self.target_error for e in errors)


def ratio_error(mine: Measurement, base: Measurement) -> float | None:
    """Relative standard error of mine / base, from the ratios of their medians round by round (None below two
    rounds). The two alternate call by call, so a round's clock, power and thermal state cancels in its ratio."""
    pairs = [(a, b) for a, b in zip(mine.round_medians_ms, base.round_medians_ms) if a > 0 and b > 0]
    if len(pairs) < 2:
        return None
    logs = [math.log(a / b) for a, b in pairs]
    return statistics.stdev(logs) / math.sqrt(len(logs))


def _time_gpu(contenders, l2_bytes, warm: tuple[float, int], rep_ms, on_output, rounds, shield_us,
              stop: _Stop) -> dict[str, Measurement]:
    import torch

    synchronize = torch.cuda.synchronize
    flush = L2Flush(l2_bytes)
    shield = LaunchShield(shield_us)
    counter = _Counter(contenders)

    def call(c: Contender) -> tuple[int, tuple, Any, tuple, float]:
        """One call, timed: (index, inputs, output, (start, end, after) events, host µs of the call itself)."""
        start, end, after = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        i = counter.take(c.name)
        args = c.prepare(i)
        flush()
        shield()
        start.record()
        shield.wait()
        began = _perf_counter()
        out = c.run(args)
        host = _perf_counter() - began
        end.record()
        synchronize()  # device-wide: work left on any stream finishes before `after` is stamped
        after.record()
        return i, args, out, (start, end, after), host * 1e6

    estimates, host_us = _warm_up(contenders, call, *warm)
    calls = _calls_per_round(contenders, estimates, rep_ms, rounds)
    shield.fit(host_us)

    # Rounds: contenders alternate call by call (the order flips every round), so a change of clock or power state
    # (the GPU boosts for about a second after idling, then settles at its power limit) hits all of them alike.
    results = {c.name: Measurement(source="gpu", host_us=statistics.median(host_us[c.name]), shield_us=shield.us)
               for c in contenders}
    for r in range(rounds):
        order = contenders if r % 2 == 0 else contenders[::-1]
        events: dict[str, list[tuple]] = {c.name: [] for c in contenders}
        for k in range(max(calls.values())):
            for c in order:
                if k >= calls[c.name]:
                    continue
                i, args, out, ev, _ = call(c)
                events[c.name].append(ev)
                if on_output is not None:
                    on_output(c.name, i, args, out)
                del out
        synchronize()
        for c in contenders:
            record = results[c.name]
            times = [start.elapsed_time(end) for start, end, _ in events[c.name]]
            record.samples_ms.extend(times)
            record.round_medians_ms.append(statistics.median(times))
            record.sync_gaps_ms.extend(end.elapsed_time(after) for _, end, after in events[c.name])
        if stop.reached(results):
            break
    return results


def _warm_up(contenders, call, warmup_ms: float, least: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Contenders alternating until each has spent `warmup_ms` (`least` calls at least): first-call costs (an
    output's first allocation, a clock still rising) happen here; compiles and autotuning, too, where no checked
    call came first (the bench stage checks each case once before timing it). Returns each one's device-busy times
    per call, which size the rounds, and its host times per call (µs; the first call's left out where there are
    more: it may carry first-call costs), which size the launch shield."""
    spent = {c.name: 0.0 for c in contenders}
    estimates: dict[str, list[float]] = {c.name: [] for c in contenders}
    host_us: dict[str, list[float]] = {c.name: [] for c in contenders}
    while any(len(estimates[c.name]) < least or spent[c.name] < warmup_ms for c in contenders):
        for c in contenders:
            _, _, out, (start, _, after), host = call(c)
            del out
            after.synchronize()
            t = start.elapsed_time(after)
            estimates[c.name].append(t)
            host_us[c.name].append(host)
            spent[c.name] += max(t, 1e-3)
        if all(len(e) >= 1000 for e in estimates.values()):
            break
    return estimates, {name: times[1:] or times for name, times in host_us.items()}


def _calls_per_round(contenders, estimates: dict[str, list[float]], rep_ms: float, rounds: int) -> dict[str, int]:
    """Each contender's share of a round, sized by its device-busy time per call in the warm-up."""
    calls = {}
    for c in contenders:
        per_call = max(statistics.median(estimates[c.name][-5:]), 1e-3)
        calls[c.name] = min(MAX_CALLS_PER_BLOCK, max(MIN_CALLS_PER_BLOCK, math.ceil(rep_ms / rounds / per_call)))
    return calls


def _time_wall(contenders, on_output, rounds) -> dict[str, Measurement]:
    # One untimed call per contender first, alike for all: a first call's costs on this case (the library's lazy
    # set-up: 55 ms for a log_softmax that then takes 0.07 ms) are no part of anyone's time. No more than one: each
    # interpreter call costs real seconds.
    counter = _Counter(contenders)
    for c in contenders:
        i = counter.take(c.name)
        args = c.prepare(i)
        out = c.run(args)
        if on_output is not None:
            on_output(c.name, i, args, out)
        del out
    results = {c.name: Measurement(source="interpreter") for c in contenders}
    for r in range(rounds):
        for c in (contenders if r % 2 == 0 else contenders[::-1]):
            i = counter.take(c.name)
            args = c.prepare(i)
            start = _perf_counter()
            out = c.run(args)
            elapsed = (_perf_counter() - start) * 1e3
            results[c.name].samples_ms.append(elapsed)
            results[c.name].round_medians_ms.append(elapsed)
            if on_output is not None:
                on_output(c.name, i, args, out)
    return results


class InputRotation:
    """Inputs for timed calls: nothing a kernel could cache by address, shape or content.

    There are n source sets (drawn by the task from distinct seeds) and n + 1 slots at distinct addresses. Call i
    writes source i % n, each floating-point tensor scaled by its own random factor in SCALE_RANGE, into slot
    i % (n + 1): a slot never sees the same content twice in a row, and no two calls see the same content.
    `rebuild(i)` recreates call i's inputs afterwards, for checking a timed output against the reference.
    """

    def __init__(self, sources: list[tuple], seed: int):
        self.sources = sources
        self.seed = seed
        self.slots = [tuple(_clone_float(x) for x in sources[0]) for _ in range(len(sources) + 1)]

    def factors(self, i: int) -> list[float]:
        rng = random.Random(self.seed * 1_000_003 + i)
        return [rng.uniform(*SCALE_RANGE) for _ in self.sources[0]]

    def __call__(self, i: int) -> tuple:
        import torch

        source = self.sources[i % len(self.sources)]
        slot = self.slots[i % len(self.slots)]
        args = []
        for x, s, f in zip(source, slot, self.factors(i)):
            if _is_float_tensor(x):
                torch.mul(x, f, out=s)
                args.append(s)
            else:
                args.append(x)
        return tuple(args)

    def rebuild(self, i: int) -> tuple:
        return scaled(self.sources[i % len(self.sources)], self.factors(i))


def scaled(inputs: tuple, factors: list[float]) -> tuple:
    """New inputs: each floating-point tensor times its factor; everything else as it is."""
    return tuple(x * f if _is_float_tensor(x) else x for x, f in zip(inputs, factors))


def _is_float_tensor(x: Any) -> bool:
    import torch

    return isinstance(x, torch.Tensor) and x.is_floating_point()


def _clone_float(x: Any) -> Any:
    return x.clone() if _is_float_tensor(x) else x
