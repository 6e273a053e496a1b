"""Reward-hacking guards: what the worker checks before, during and after a candidate runs.

- `rules.py`: the rule ids (`static.*`, `runtime.*`), the `ops=strict|partial` policies as the checks each waives,
  and `Rejection`, how every guard says no.
- `static/`: the candidate's sources read before import (Python as ASTs, CUDA/C++ tokenized).
- `sentinel.py`: created before import; notices replaced timers and scoring functions, new threads, and writes or
  process spawns outside the candidate's folder, through the process-wide hooks of `audit.py`.
- `runtime.py`: the op recorder (the reference's compute ops may not appear in the candidate's call; under strict
  no torch op but allocation, views and copies may), the output-type check and the input fingerprint.

The names below are the guards' API; the worker and the tests use them from here.
"""

from __future__ import annotations

from pathlib import Path

from avo.evaluate.guards.rules import RULES, Rejection
from avo.evaluate.guards.runtime import (ANY_COMPUTE, OWN_WORK, call_watched, check_inputs_unchanged,
                                         check_output_type, fingerprint, forbidden_ops, watched_ops, watches_ops)
from avo.evaluate.guards.sentinel import Sentinel

__all__ = [
    "ANY_COMPUTE",
    "OWN_WORK",
    "RULES",
    "Rejection",
    "Sentinel",
    "call_watched",
    "check_inputs_unchanged",
    "check_output_type",
    "check_static",
    "fingerprint",
    "forbidden_ops",
    "watched_ops",
    "watches_ops",
]


def check_static(candidate_dir: Path, task_name: str, ops: str = "strict", kernel_required: bool = True) -> None:
    """Rejection naming the rule, file and line of the first construct in the candidate's sources that the `ops`
    policy forbids; `kernel_required`: whether defining no kernel is one (static.no_kernel)."""
    from avo.evaluate.guards.static.check import check_static as _check

    _check(Path(candidate_dir), task_name, ops, kernel_required)
