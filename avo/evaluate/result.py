"""EvalResult: what one evaluation of one candidate found. Stored as `evals/<cid>.json` in a run."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, Field

from avo.util.format import headline

Status = Literal["correct", "incorrect", "compile_error", "timeout", "crash", "rejected", "not_run"]
"""`not_run`: compiled, but nothing could run here (CUDA sources without a GPU)."""
TimingSource = Literal["gpu", "interpreter", "none"]


class CaseResult(BaseModel):
    """One case of one suite. Times are medians over repetitions; `spread` is their coefficient of variation."""

    case: str
    suite: str
    dtype: str = "bfloat16"
    correct: bool | None = None
    rel_err: float | None = None
    library_rel_err: float | None = None
    """The library's own relative error on the same inputs (float32 cases; worker/precision.py)."""
    tolerance: float | None = None
    ms: float | None = None
    library_ms: float | None = None
    tflops: float | None = None
    library_tflops: float | None = None
    speedup: float | None = None
    """Library time / candidate time (> 1 means faster than the library)."""
    library_precision: str | None = None
    """How the library was timed on a float32 case: 'fp32' (as configured) or 'tf32' (TF32 allowed, for a candidate
    whose float32 error is past fp32's: worker/precision.py); None where not timed or not float32."""
    spread: float | None = None
    library_spread: float | None = None
    ms_error: float | None = None
    """Relative standard error of `ms`: the spread of its per-round medians over √rounds (GPU timing)."""
    library_ms_error: float | None = None
    speedup_error: float | None = None
    """Relative standard error of `speedup`, from the per-round ratios of candidate to library (GPU timing)."""
    rounds: int | None = None
    """Timing rounds the case took (fewer than the most when every contender's error was already small)."""
    host_us: float | None = None
    """The candidate's host time per call (its wrapper's launch work, median over the warm-up), GPU timing only."""
    library_host_us: float | None = None
    """The library's host time per call, measured alike: what a caller that waits on each call pays beside the GPU
    time (a packaged kernel trades the difference against its GPU time saved)."""
    launch_shield_us: float | None = None
    """The device spin before each timed call's start event in this case: the configured one, or longer where a
    contender's launch work takes longer (evaluate/worker/timing.py)."""
    weight: float = 1.0
    """The case's weight in the fitness (a workload's share of the user's time; 1 in the built-in suites)."""
    bucket: str | None = None
    """The shape bucket whose configuration the kernel's table gave this case (read from its `bucket()` rule by the
    agent side, agent/buckets.py); None where the kernel has no table."""
    input_scale: float = 1.0
    """The factor the case's floating-point inputs were scaled by before the call (worker.check.CHECK_SCALES)."""
    message: str = ""


class EvalResult(BaseModel):
    status: Status
    message: str = ""
    """The error text the agent needs (compiler error, failing case and its relative error, guard rule and line)."""
    rule: str | None = None
    """The guard that rejected the candidate, or the check that failed, as a short id (e.g. 'static.library_call')."""
    cases: list[CaseResult] = Field(default_factory=list)
    fitness: float = 0.0
    """Geometric-mean speedup over the bench cases; 0 unless every check case passed."""
    suspicious: bool = False
    suspicious_reason: str = ""
    timing_source: TimingSource = "none"
    """Where the times come from: 'gpu' (CUDA events) or 'interpreter' (wall clock, not GPU performance)."""
    device: str = ""
    gpu: str = ""
    library: str = ""
    ops: str = "strict"
    """The policy on library ops it was scored under: 'strict' (every compute op its own) or 'partial' (torch ops
    allowed for the parts it does not replace; KernelBench tasks, `ops=partial`)."""
    library_precision: str = ""
    """'tf32' where any case's speedup is against the library with TF32 allowed (the candidate's float32 error is past
    fp32's), 'fp32' where every float32 case's is against the library as configured; '' without timed float32
    cases."""
    versions: dict[str, str] = Field(default_factory=dict)
    seed: int | None = None
    notes: list[str] = Field(default_factory=list)
    """How it was scored, where that differs from the configuration (e.g. an input rotation reduced to fit memory)."""
    wall_s: float = 0.0
    stage_s: dict[str, float] = Field(default_factory=dict)
    worker: str = ""
    """Which worker scored it: 'gpu 3' (the GPU its process was pinned to, as the node numbers it), 'cpu 1' (an
    interpreter worker); '' where a single evaluator ran it unpinned (`avo bench`)."""
    node: str = ""
    """The host that ran it (a Ray node: its address and node id)."""

    def placement(self) -> str:
        """'gpu 3', 'gpu 0 on 10.0.0.5 (node 1a2b3c4d)', or '' when not recorded."""
        return placement(self.worker, self.node)

    @property
    def ok(self) -> bool:
        return self.status == "correct"

    def bench_cases(self) -> list[CaseResult]:
        return [c for c in self.cases if c.speedup is not None]

    def weighted_fitness(self, bucket: str | None = None) -> float:
        """Weighted geometric-mean speedup over the bench cases (of one bucket, if given): what `fitness` is."""
        cases = [c for c in self.bench_cases() if bucket is None or c.bucket == bucket]
        return geomean([c.speedup for c in cases], [c.weight for c in cases])

    def buckets(self) -> list[str]:
        """The shape buckets its bench cases fall in, in case order (none where the kernel has no table)."""
        return list(dict.fromkeys(c.bucket for c in self.bench_cases() if c.bucket is not None))

    def fitness_error(self) -> float | None:
        """Relative standard error of `fitness` from each bench case's `speedup_error` (the weighted geometric
        mean's log is the weighted mean of the cases' logs); None when a case has none (results recorded before)."""
        cases = self.bench_cases()
        if not cases or any(c.speedup_error is None for c in cases):
            return None
        return weighted_error([c.speedup_error for c in cases], [c.weight for c in cases])

    def summary(self) -> str:
        """One line for logs, lineage commit messages and the agent."""
        if self.status != "correct":
            return f"{self.status}: {headline(self.message)[:160]}"
        src = "" if self.timing_source == "gpu" else f" [{self.timing_source}]"
        flag = " SUSPICIOUS" if self.suspicious else ""
        ops = "" if self.ops == "strict" else f" [ops={self.ops}]"
        tf32 = " (TF32 allowed)" if self.library_precision == "tf32" else ""
        return f"correct, fitness {self.fitness:.3f}x {self.library or 'library'}{tf32}{src}{ops}{flag}"


def placement(worker: str, node: str) -> str:
    """Where a result was scored, from its worker and node fields (either may be empty)."""
    return f"{worker} on {node}" if worker and node else worker or node


def geomean(values: list[float], weights: list[float] | None = None) -> float:
    """Geometric mean of the positive finite values, each weighted (equal weights: exactly the plain mean)."""
    weights = [1.0] * len(values) if weights is None or len(set(weights)) <= 1 else weights
    kept = [(v, w) for v, w in zip(values, weights) if v and v > 0 and math.isfinite(v)]
    if not kept:
        return 0.0
    total = sum(w for _, w in kept)
    return math.exp(sum(w * math.log(v) for v, w in kept) / total)


def weighted_error(errors: list[float], weights: list[float]) -> float:
    """Relative standard error of a weighted geometric mean from its terms' relative errors: sqrt(sum (w e)^2) /
    sum w (equal weights: sqrt(sum e^2) / n)."""
    total = sum(weights)
    return math.sqrt(sum((w * e) ** 2 for w, e in zip(weights, errors))) / total if total else 0.0
