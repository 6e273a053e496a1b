"""What the worker's stages share: the candidate under evaluation, the evaluation's context, and the verdicts.

`Verdict` ends one candidate's evaluation with a final status; `classify` says which status an exception raised by
candidate code means. The check and bench stages and the evaluation that drives them all import these from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from avo.cuda import CudaCompileError
from avo.evaluate.guards import Rejection
from avo.evaluate.result import EvalResult
from avo.evaluate.worker.correctness import CaseFailure
from avo.evaluate.worker.loader import trimmed_traceback


class Progress:
    """Appends `stage<TAB>case<TAB>candidate` lines the parent polls."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    def mark(self, stage: str, case: str = "", who: int = 0) -> None:
        self.stream.write(f"{stage}\t{case}\t{who}\n")
        self.stream.flush()


class Verdict(Exception):
    """Ends one candidate's evaluation with a final status (rejected, compile_error, crash)."""

    def __init__(self, status: str, rule: str, message: str):
        super().__init__(message)
        self.status, self.rule, self.message = status, rule, message


@dataclass
class Candidate:
    index: int
    path: Path
    result: EvalResult
    entry: Any = None
    sentinel: Any = None
    failures: list[CaseFailure] = field(default_factory=list)
    cuda: bool = False
    """Has CUDA C++ sources (compiled by its own wrapper through CuPy)."""
    reference_wrapper: bool = False
    """The task's own first candidate, unchanged (its reference wrapped): scored as the baseline."""
    done: bool = False
    """True once a final verdict is set (rejected, compile_error, crash): no further stage runs it."""

    @property
    def passing(self) -> bool:
        return not self.done and not self.failures

    def watched(self, forbidden: frozenset[str]) -> frozenset[str]:
        """The ops this candidate may not dispatch: none for the task's unchanged first candidate."""
        return frozenset() if self.reference_wrapper else forbidden

    def finish(self, verdict: Verdict) -> None:
        self.result.status, self.result.rule, self.result.message = verdict.status, verdict.rule, verdict.message
        self.done = True


@dataclass
class Context:
    task: Any
    device: str
    """'cuda' or 'interpret'."""
    gpu: Any
    config: Any
    """avo.config.EvalConfig"""
    seed: int
    progress: Progress
    check_suite: str
    bench_suite: str
    compile_pool: Any = None
    judge: Any = None
    """Who compares the check suite's outputs with the references: avo, over the check pipes
    (references.ChannelJudge), or this process where no parent judges (references.LocalJudge)."""
    """precompile.CompilePool, when the candidates' Triton kernels are compiled ahead."""
    bench_ops: dict = field(default_factory=dict)
    """Per bench case, the ops the library dispatches on its shapes, recorded in the set-up (evaluation.prepare),
    which also built the library's plans for them (cuDNN's per shape): neither is billed to a candidate."""

    @property
    def tensor_device(self) -> str:
        return "cuda" if self.device == "cuda" else "cpu"

    @property
    def timed_reference(self) -> Any:
        """What bench-stage outputs are checked against: the task's `timed_reference` where it has one, else its
        exact reference (worker/bench.py says why)."""
        return getattr(self.task, "timed_reference", None) or self.task.reference

    @property
    def ops(self) -> str:
        """The task's policy on library ops: 'strict' (every compute op the candidate's own) or 'partial'."""
        return getattr(self.task, "ops", "strict")

    @property
    def kernel_required(self) -> bool:
        """Whether a candidate must define a kernel of its own (static.no_kernel): where the task offers an ops
        policy (KernelBench), whose first candidate is Model itself. A built-in task's wrapper has no library path
        to keep; one without a kernel can only compute with torch ops, which the strict op recorder rejects."""
        return hasattr(self.task, "ops")


def classify(exc: BaseException, candidate: Candidate, doing: str) -> Verdict:
    """What an exception raised by candidate code means for its status."""
    if isinstance(exc, Rejection):
        return Verdict("rejected", exc.rule, exc.message)
    if isinstance(exc, CaseFailure):  # a check that ends the candidate: its call wrote past an allocation
        return Verdict("incorrect", exc.rule, exc.message)
    if isinstance(exc, CudaCompileError):
        return Verdict("compile_error", "compile", exc.message)
    name = type(exc).__name__
    if type(exc).__module__.startswith("triton") and ("Compil" in name or "OutOfResources" in name):
        message = trimmed_traceback(exc, candidate.path, f"{doing}: Triton compile failed")
        return Verdict("compile_error", "compile", message)
    return Verdict("crash", "crash", trimmed_traceback(exc, candidate.path, f"{doing} raised"))
