"""Re-scoring a recorded run on this machine (`avo replay --rebench`) and driving its model turns again (`--redrive`).

Re-bench checks each chosen candidate out of the lineage into a temporary folder and hands it to today's Evaluator,
then sets the recorded evaluation beside the new one, each labelled with where its times came from. Re-drive is
`avo evolve --agent replay --replay-from RUN` with the recorded run's task and settings (`redrive_settings`): a new
run whose model turns are the recorded ones and whose tool calls (edits, evaluations) happen for real here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from avo.config import flatten
from avo.errors import UserError
from avo.util import procs
from avo.util.format import number
from avo.evaluate.result import EvalResult


@dataclass
class Rescore:
    cid: str
    accepted: bool
    recorded: EvalResult | None
    now: EvalResult


def recorded_eval(run, cid: str) -> EvalResult | None:
    """evals/<cid>.json, or the summary committed with the candidate when that file is missing."""
    result = run.load_eval(cid)
    if result is None:
        try:
            result = EvalResult.model_validate(run.lineage.record(cid).get("eval", {}))
        except Exception:  # an old or foreign record: nothing recorded to compare with
            return None
    return result


def choose(run, everything: bool) -> list[str]:
    """Accepted candidates (the baseline among them when it was correct), or every candidate, oldest first."""
    log = run.lineage.log()[::-1]
    chosen = [c.cid for c in log if everything or c.accepted]
    if not chosen:
        raise UserError(f"run {run.id} has no {'candidates' if everything else 'accepted candidates'} to re-bench"
                        + ("" if everything else " (add --all to re-score every candidate)"))
    return chosen


def target(run, device: str | None, gpu: str | None) -> tuple[str, str]:
    """(device, GPU name) for today's evaluation: the run's own device unless told otherwise."""
    from avo.gpus import PROFILES

    device = device or run.config.device
    if device not in ("cuda", "interpret"):
        raise UserError(f"unknown device '{device}': use cuda or interpret")
    if gpu is None:  # under the interpreter, keep the run's GPU label (it only names the compile target)
        recorded = str(run.info().get("gpu", "")).lower()
        gpu = recorded if device == "interpret" and recorded in PROFILES else "auto"
    return device, gpu


def rebench(run, *, everything: bool = False, device: str | None = None, gpu: str | None = None,
            progress=None) -> list[Rescore]:
    from avo.evaluate.harness import Evaluator
    from avo.tasks import load

    from avo.gpus import resolve

    device, gpu = target(run, device, gpu)
    profile = resolve(gpu, device)
    load(run.config.kernel)  # an unknown or missing task file fails here, in one line
    cids = choose(run, everything)
    accepted = {c.cid for c in run.lineage.log() if c.accepted}
    evaluator = Evaluator(run.config.kernel, device=device, gpu=profile, config=run.config.evaluation)
    rows = []
    for n, cid in enumerate(cids, 1):
        if progress is not None:
            progress(f"re-scoring {cid} ({n} of {len(cids)}) on {describe(device, profile.name)} ...")
        with procs.temp_dir("rebench") as tmp:
            run.lineage.checkout(cid, Path(tmp))
            now = evaluator.evaluate(Path(tmp))
        rows.append(Rescore(cid=cid, accepted=cid in accepted, recorded=recorded_eval(run, cid), now=now))
    return rows


def describe(device: str, gpu: str) -> str:
    return "the Triton interpreter (CPU wall clock)" if device == "interpret" else f"GPU {gpu}"


def source_of(result: EvalResult | None) -> str:
    """Where a result's times came from, e.g. 'gpu h200' or 'interpreter'."""
    if result is None:
        return "not recorded"
    if result.timing_source == "gpu":
        return f"gpu {result.versions.get('gpu_device') or result.gpu or '?'}"
    return result.timing_source


def _fitness(result: EvalResult | None) -> str:
    if result is None:
        return "-"
    if result.status != "correct":
        return f"{result.status}" + (f" ({result.rule})" if result.rule else "")
    return f"{result.fitness:.4g}"


def show_rescores(console: Console, run, rows: list[Rescore]) -> None:
    sources_then = sorted({source_of(r.recorded) for r in rows})
    sources_now = sorted({source_of(r.now) for r in rows})
    table = Table("cid", "accepted", escape(f"recorded fitness [{', '.join(sources_then)}]"),
                  escape(f"now fitness [{', '.join(sources_now)}]"), "now / recorded",
                  title=escape(f"run {run.id}: recorded vs now"))
    for r in rows:
        ratio = "-"
        if r.recorded is not None and r.recorded.ok and r.now.ok and r.recorded.fitness:
            ratio = f"{r.now.fitness / r.recorded.fitness:.3f}"
        table.add_row(r.cid, "yes" if r.accepted else "", escape(_fitness(r.recorded)), escape(_fitness(r.now)), ratio)
    console.print(table)
    if sources_then != sources_now:
        console.print(Text("recorded and new timings come from different sources: compare ratios within a column, "
                           "not absolute figures across columns", style="yellow"))
    for r in rows:
        cases = case_rows(r.recorded, r.now)
        if not cases:
            if not r.now.ok:
                console.print(Text(f"{r.cid} now: {r.now.summary()}", style="red"))
            continue
        title = f"{r.cid} per case: recorded [{source_of(r.recorded)}] vs now [{source_of(r.now)}]"
        detail = Table("case", "recorded TFLOPS", "now TFLOPS", "now / recorded", "recorded speedup", "now speedup",
                       title=escape(title))
        for row in cases:
            detail.add_row(*map(escape, row))
        console.print(detail)


def case_rows(recorded: EvalResult | None, now: EvalResult) -> list[tuple[str, ...]]:
    """Timed cases of both, matched by suite and case name; cases timed on one side only show '-' on the other."""
    def timed(result):
        return {} if result is None else {(c.suite, c.case): c for c in result.bench_cases()}

    then, today = timed(recorded), timed(now)
    rows = []
    for key in [*then, *(k for k in today if k not in then)]:
        a, b = then.get(key), today.get(key)
        ratio = f"{b.tflops / a.tflops:.3f}" if a and b and a.tflops and b.tflops else "-"
        rows.append((f"{key[0]}/{key[1]}", number(a and a.tflops), number(b and b.tflops), ratio,
                     number(a and a.speedup), number(b and b.speedup)))
    return rows


def redrive_settings(run, *, runs_dir: Path, device: str | None, gpu: str | None) -> dict:
    """The flags of a new run whose model turns are the recorded ones (its tools, edits and evaluations, run for
    real here): the recorded task and settings, the replay agent, and a budget the recorded turns decide."""
    settings = flatten(run.config, mode="json")
    settings.update({
        "runs_dir": str(runs_dir), "agent.kind": "replay", "agent.replay_from": str(run.path),
        # the recorded turns decide how long the re-drive lasts, not the original budget
        "budget.hours": 24.0 * 365, "budget.max_candidates": None, "budget.max_cost": None,
    })
    settings["device"], settings["gpu"] = target(run, device, gpu)
    return settings
