"""What a task is: the contract between a problem (attention, GEMM, a KernelBench file) and the evaluator.

A candidate defines the task's `entry` (a function, or the class `ModelNew`); the evaluator calls it through
`Task.call` on inputs from `make_inputs`, compares with `reference` (float32, or float64 on the CPU) by relative norm,
and times it against `library` (what a user would otherwise call) on the same inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

SUITES = ("check", "bench", "wide", "tiny")


@dataclass(frozen=True)
class Case:
    """One problem instance: a name that reads well in a table, its shape parameters, its dtype and its weight in
    the fitness (a workload's share of the user's time; the built-in suites weigh every case alike)."""

    name: str
    params: dict[str, Any] = field(default_factory=dict, hash=False)
    dtype: str = "bfloat16"
    weight: float = 1.0

    def __str__(self) -> str:
        return self.name


@runtime_checkable
class Task(Protocol):
    name: str
    entry: str
    """What a candidate's kernel.py must define."""

    def cases(self, suite: str) -> list[Case]:
        """Cases of one suite: `check` (correctness: odd and edge shapes), `bench` (timed), `wide` (timed: the
        shapes models run; built-in tasks only), `tiny` (interpreter)."""
        ...

    def make_inputs(self, case: Case, seed: int, device: str) -> tuple:
        """Positional arguments for the entry, drawn from `seed` (never all zeros)."""
        ...

    def call(self, entry: Any, inputs: tuple) -> Any:
        """Run a candidate's entry on inputs and return its output tensor."""
        ...

    def reference(self, *inputs: Any) -> Any:
        """The exact answer in float32 (float64 on the CPU), chunked where a full float32 copy would not fit."""
        ...

    def library(self, *inputs: Any) -> Any:
        """The vendor path a user would call (cuDNN SDPA, cuBLAS through torch), in the task's dtype."""
        ...

    def library_name(self) -> str:
        """Which library path `library` took on this machine (e.g. 'cudnn sdpa')."""
        ...

    def flops(self, case: Case) -> float: ...

    def bytes(self, case: Case) -> float: ...

    def tolerance(self, dtype: str) -> float:
        """Bound on ||out - ref|| / ||ref|| for outputs of this dtype."""
        ...

    def output_like(self, case: Case, inputs: tuple) -> tuple[tuple[int, ...], str]:
        """Expected output shape and dtype name."""
        ...

    def default_seed(self) -> str:
        """Path of the shipped seed kernel folder."""
        ...


def relative_error(out: Any, ref: Any) -> float:
    """||out - ref|| / ||ref|| computed in float64; NaN or Inf anywhere gives inf."""
    import torch

    o = out.detach().to(torch.float64)
    r = ref.detach().to(torch.float64)
    if not bool(torch.isfinite(o).all()):
        return float("inf")
    denom = float(torch.linalg.vector_norm(r))
    num = float(torch.linalg.vector_norm(o - r))
    if denom == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return num / denom
