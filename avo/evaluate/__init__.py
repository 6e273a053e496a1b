"""Is a candidate correct, and how fast: scored in an isolated child process.

- `harness.py`: the parent side: spawns the worker with a scrubbed environment inside the OS sandbox, applies the
  stage limits, kills its process group when one is exceeded, reads its signed verdict from the result pipe.
- `worker_process.py`: one worker process, started ahead of its candidate; its box, result channel and token.
- `trusted_cache.py`: the builds a set-up-only worker made, copied into each sandboxed worker's private caches.
- `sandbox.py`: the bubblewrap sandbox evaluation workers and the shell tool run in (PID namespace, no network,
  read-only system, home and runs folders masked).
- `plausible.py`: the parent's own check of a GPU result against the GPU's peak FLOP rate and HBM bandwidth.
- `result.py`: EvalResult and CaseResult, stored as `evals/<cid>.json`.
- `worker/`: the child side: candidate loader, check and bench stages, timing.
- `guards/`: the reward-hacking checks, static and at run time, with their rules.
- `cuda_compile.py`: CUDA sources compiled with nvcc where there is no GPU (compile errors, register reports).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from avo.evaluate.result import EvalResult


@runtime_checkable
class Evaluator(Protocol):
    """What the agent needs of an evaluator: harness.Evaluator (a fresh worker process per evaluation) is the one
    avo runs with; tests give a fake that scores instantly."""

    def evaluate(self, candidate_dir: Path) -> EvalResult:
        """Score one candidate folder: check suite, then the bench suite timed against the library."""
        ...

    def confirm(self, candidate_dir: Path, incumbent_dir: Path) -> tuple[EvalResult, EvalResult]:
        """Re-score a candidate and the incumbent side by side, timed interleaved (for acceptance)."""
        ...
