"""Which candidate of a run gets packaged, and the refusals: a task other than attention or GEMM, a candidate that
is not correct, one measured only under the interpreter (unless the user accepts it unmeasured)."""

from __future__ import annotations

from dataclasses import dataclass

from avo.errors import UserError
from avo.evaluate.result import EvalResult
from avo.run.directory import Run

SUPPORTED = ("attention", "gemm")


@dataclass(frozen=True)
class Chosen:
    task: str
    cid: str
    sha: str
    result: EvalResult


def choose(run: Run, rev: str, *, allow_unmeasured: bool = False) -> Chosen:
    """The candidate `rev` names in `run`, refused in one line when it cannot be packaged."""
    task = run.info().get("task", "?")
    if task not in SUPPORTED:
        raise UserError(f"run '{run.id}' evolved {task}: avo package supports the built-in attention and gemm "
                        "tasks only (a KernelBench problem has no library op to stand in for)")
    lineage = run.lineage
    cid = lineage.resolve(rev)
    info = lineage.info(cid)
    result = run.load_eval(cid)
    if result is None:
        raise UserError(f"{cid} has no evaluation in {run.evals_dir} (evals/{cid}.json): nothing says it is correct")
    if info.status != "correct" or not result.ok:
        status = result.status if info.status == "correct" else info.status
        raise UserError(f"{cid} is {status}, not correct: only a correct "
                        "candidate can be packaged (see: avo show RUN CID)")
    if result.timing_source != "gpu" and not allow_unmeasured:
        raise UserError(f"{cid} was measured only under the {result.timing_source or 'no'} timing, never on a GPU: "
                        "package it anyway with --allow-unmeasured, or re-score it on a GPU first")
    return Chosen(task=task, cid=cid, sha=info.sha, result=result)
