"""Task registry: `load("attention")`, `load("gemm")`, or `load("path/to/problem.py")` for a KernelBench file.

- `base.py`: the Task protocol, cases and suites, and the relative-norm error.
- `attention.py`, `gemm.py`: the built-in tasks, their reference, library path, bench suites and seeds.
- `workload.py`: a user's own cases (--shapes, --workload FILE, --model config.json), timed instead of bench.
- `kernelbench/`: KernelBench-format problem files as tasks.
- `meta.py`: a case's inputs as meta tensors (compiling without running).
"""

from __future__ import annotations

from pathlib import Path

from avo.errors import UserError
from avo.tasks.base import SUITES, Case, Task, relative_error

BUILTIN = ("attention", "gemm")

__all__ = ["BUILTIN", "SUITES", "Case", "Task", "load", "relative_error"]


def load(spec: str, workload=None) -> Task:
    """The task named by `--kernel`: a built-in name or a path to a KernelBench-format .py file. `workload` (a
    tasks.workload.Workload, built-in tasks only) replaces its bench suite with the user's cases."""
    if spec == "attention":
        from avo.tasks.attention import AttentionTask

        return AttentionTask(workload)
    if spec == "gemm":
        from avo.tasks.gemm import GemmTask

        return GemmTask(workload)
    if workload is not None:
        raise UserError("a workload (--shapes, --workload, --model) goes with --kernel attention or gemm; a task "
                        "file brings its own shapes")
    check_spec(spec)
    try:
        from avo.tasks.kernelbench.task import KernelBenchTask
    except ImportError:
        raise UserError("KernelBench-format tasks are not supported by this version of avo") from None
    return KernelBenchTask.from_spec(spec)


def check_spec(spec: str) -> None:
    """A clear error for a `--kernel` that names no task: neither a built-in name nor an existing .py file (what
    load() would refuse, checked before anything slower, such as looking for a GPU)."""
    if spec in ("attention", "gemm"):
        return
    path = Path(spec.partition("?")[0])  # `problem.py?baseline=compile`: options after the path
    if path.suffix != ".py":
        raise UserError(f"unknown kernel '{spec}': use attention, gemm, or a path to a KernelBench-format .py file")
    if not path.is_file():
        raise UserError(f"task file not found: {path}")
