"""The seed: the folder a run starts from, the checks it must pass before any run exists, and its evaluation as the
run's baseline."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from avo.agent.buckets import annotate_folder
from avo.agent.heuristic.knobs import KnobError, parse_knobs
from avo.agent.models.factory import resolve_kind
from avo.errors import UserError
from avo.run.lineage.records import left_out
from avo.util import safe_files
from avo.util.format import headline

if TYPE_CHECKING:
    from avo.config import AgentConfig
    from avo.evaluate import Evaluator
    from avo.evaluate.result import EvalResult
    from avo.run.directory import Run
    from avo.tasks.base import Task


def seed_folder(value: str | None, task: Task, default: Path | None = None) -> Path:
    """`--seed-kernel` as a folder: a path, or a name beside the task's shipped seed (`triton_naive`, `gemm/x`);
    `default` (the machine's default seed, see seed_target.machine_default_seed) when none is named."""
    default = default or Path(task.default_seed())
    if value is None:
        found = default
    else:
        options = [Path(value), default.parent / value, default.parent.parent / value]
        found = next((p for p in options if p.is_dir()), Path(value))
    if not (found / "kernel.py").is_file():
        raise UserError(f"seed kernel folder {found} has no kernel.py: give a folder holding the task's kernel.py")
    return found


def baseline(run: Run, evaluator: Evaluator, seed_dir: Path) -> tuple[str, EvalResult]:
    """Copy the seed into the workspace, score it, commit it and tag it `baseline` (and `best` when correct).
    A run killed after the seed's commit but before its `baseline` event finishes here on resume, from that commit
    (tagging and accepting again are harmless)."""
    lineage = run.lineage
    first = lineage.cids()[0] if len(lineage) else None
    if run.workspace.exists():
        shutil.rmtree(run.workspace)
    if first is None:
        try:  # the files a candidate consists of, as regular files: a link in the seed is not followed
            safe_files.copy_tree(Path(seed_dir).resolve(), run.workspace, left_out)
        except safe_files.UnsafeFile as exc:
            raise UserError(f"seed kernel folder {seed_dir}: {exc}; put the file itself there") from None
    else:
        lineage.checkout(first, run.workspace)
    result = (run.load_eval(first) if first else None) or evaluator.evaluate(run.workspace)
    # Its cases' table entries, as every later candidate's: bucket-wise acceptance compares against these.
    annotate_folder(result, run.workspace, run.config)
    run.hold_eval(result)
    cid = first or lineage.commit(run.workspace, parent=None, result=result, model="seed",
                                  rationale=f"baseline: the seed kernel {seed_dir}")
    run.save_eval(cid, result)
    lineage.tag_baseline(cid)
    if result.ok:
        lineage.accept(cid)
    run.append_event("baseline", cid=cid, seed=str(seed_dir), summary=result.summary(), status=result.status,
                     fitness=result.fitness, workspace_parent=cid)
    return cid, result


def check_seed_for_agent(agent: AgentConfig, seed_dir: Path) -> None:
    """UserError before any run exists when the agent can do nothing with the seed: the heuristic agent only moves
    `# avo: tune` knobs."""
    if resolve_kind(agent)[0] != "heuristic":
        return
    try:
        knobs = parse_knobs((seed_dir / "kernel.py").read_text(errors="replace"))
    except KnobError:
        knobs = []
    if not knobs:
        raise UserError(f"the heuristic agent only tunes `# avo: tune` knobs and {seed_dir / 'kernel.py'} has none: "
                        "give --seed-kernel a folder whose kernel.py marks its tunable constants (e.g. "
                        "`BLOCK = 128  # avo: tune 64 128 256`), or use an LLM agent (--agent anthropic with "
                        "ANTHROPIC_API_KEY set, or --agent openai --base-url URL)")


def seed_failure(result: EvalResult, seed_dir: Path, spec: str, run_id: str, device: str) -> str:
    """One line for a seed that is not correct: every variant of it would fail the same way, so nothing is evolved."""
    what = {"rejected": "a guard", "incorrect": "the check suite"}.get(result.status, f"evaluation ({result.status})")
    text = headline(result.message)
    rule = "" if not result.rule or text.startswith(result.rule) else f"{result.rule}: "
    where = " --device interpret" if device == "interpret" else ""
    return (f"the seed {seed_dir} failed {what}: {rule}{text[:400]}; run {run_id} stopped before any candidate: "
            f"fix the seed and check it with: avo bench {seed_dir} --kernel '{spec}'{where}")
