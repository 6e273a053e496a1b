"""`avo evolve --kernel DIR`: one evolve run per KernelBench problem file in DIR, each with its own budget, then a
summary table with fast_p (evolve.py wires the flags).

Run ids are `<sweep>-<problem stem>`, so the same command again resumes: a finished or failed run is read back as it
is, a stopped one is resumed, a missing one is started. The seed of a problem is `SEEDS/<stem>` when --seed-kernel
names a folder holding one, else the task's first candidate. A problem that cannot be evolved (its file does not
load, its seed fails, the heuristic agent has no knobs to tune) is a row with its reason; the sweep goes on.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from avo.tasks.kernelbench import sweep
from avo.util.atomic import write_text_atomic
from avo.errors import UserError

INTERRUPTED = 130


def evolve_folder(folder: Path, *, overrides: dict, config_file: str | None, quiet: bool, ops: str | None,
                  hours_per_problem: float | None, sweep_id: str | None, out=None) -> int:
    from avo.commands.bench_folder import load_problem
    from avo.commands.evolve import evolve
    from avo.config import RunConfig, resumable
    from avo.run.directory import Run, check_run_id
    from avo.tasks.kernelbench.spec import with_options

    out = out or sys.stdout
    say = lambda line: print(line, file=out, flush=True)  # noqa: E731
    found = sweep.problems(folder)
    if not found:
        raise UserError(f"no problem files (*.py) in {folder}")
    if overrides.get("budget.hours") is not None:
        raise UserError("with --kernel DIR the budget is per problem: use --hours-per-problem (and --max-candidates)")
    config = RunConfig.load(config_file, {k: v for k, v in overrides.items() if k != "kernel"})
    runs_dir = Path(config.runs_dir)
    name = check_run_id(sweep_id or re.sub(r"[^A-Za-z0-9._-]+", "-", Path(folder).resolve().name).strip("-."))
    seeds = Path(overrides["seed_kernel"]) if overrides.get("seed_kernel") else None
    rows: list[sweep.Row] = []
    interrupted = False
    for i, problem in enumerate(found, start=1):
        run_id = f"{name}-{problem.stem}"
        say(f"[{i}/{len(found)}] {problem.stem}: run {run_id}")
        loaded = load_problem(with_options(str(problem), ops=ops), config.device)
        if isinstance(loaded, sweep.Row):
            rows.append(loaded)
            continue
        seed = seeds / problem.stem if seeds and (seeds / problem.stem / "kernel.py").is_file() else None
        per_problem = {**overrides, "kernel": str(problem), "seed_kernel": str(seed) if seed else None,
                       "budget.hours": hours_per_problem}
        code = 0
        try:
            if not (runs_dir / run_id).is_dir():
                code = evolve(overrides=per_problem, config_file=config_file, resume=None, quiet=quiet, out=out,
                              ops=ops, run_id=run_id)
            elif Run.open(run_id, runs_dir).info().get("state") not in ("finished", "failed"):
                code = evolve(overrides={**resumable(per_problem), "runs_dir": str(runs_dir)}, config_file=None,
                              resume=run_id, quiet=quiet, out=out)
        except UserError as exc:
            if not (runs_dir / run_id).is_dir():
                rows.append(sweep.Row(problem.stem, "failed", reason=str(exc)))
                continue
        rows.append(row_of_run(problem.stem, Run.open(run_id, runs_dir)))
        if code == INTERRUPTED:
            interrupted = True
            break
    data = sweep.summary(rows, title=f"avo evolve: {folder} · sweep {name}", clock=_clock(config.device),
                         compile_asked=False, folder=str(folder), sweep=name, device=config.device,
                         ops=ops or "strict", hours_per_problem=hours_per_problem,
                         max_candidates=config.budget.max_candidates)
    path = runs_dir / f"{name}-sweep.json"
    write_text_atomic(path, json.dumps(data, indent=2) + "\n")
    sweep.render(data, out)
    say(f"summary: {path}")
    if interrupted:
        say("interrupted: run the same command again to continue the sweep")
        return INTERRUPTED
    return 0


def row_of_run(problem: str, run) -> sweep.Row:
    """A problem's row from its run: the best candidate's fitness (the seed's beside it, for the gain), or why there
    is none."""
    info = run.info()
    best = run.lineage.best
    result = run.load_eval(best) if best else None
    base = run.load_eval(run.lineage.baseline) if run.lineage.baseline else None
    if result is None:
        reason = info.get("reason") or (f"{base.status}: {sweep.reason_of(base)}" if base else "no candidate evaluated")
        return sweep.Row(problem, info.get("state", "failed"), reason=str(reason)[:400],
                         message=base.message if base else "", run=run.id)
    timed = result.timing_source != "none"
    row = sweep.row_of(problem, result, timed)
    row.run = run.id
    row.extra.update(best=best, state=info.get("state"), candidates=run.counters().get("candidates"),
                     baseline_fitness=base.fitness if base is not None and base.ok else None)
    return row


def _clock(device: str) -> str:
    return "interpreter (wall clock, not GPU performance)" if device == "interpret" else "gpu"
