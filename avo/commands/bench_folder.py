"""`avo bench --kernel DIR --candidates SOLUTIONS`: every problem file in DIR scored against
`SOLUTIONS/<problem stem>/kernel.py`, then a summary table with KernelBench's fast_p (bench.py wires the flags)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from avo.tasks.kernelbench import sweep
from avo.errors import UserError
from avo.util.format import first_line


def bench_folder(kernel_dir: Path, candidates: Path, *, suite_plan: tuple[str, str], suite: str, gpu: str, device: str,
                 ops: str | None, compile_too: bool, seed: int | None, as_json: bool) -> int:
    """Score every problem; 0 when every one is correct, else 1 (a problem that cannot be scored is a row)."""
    from avo.config import EvalConfig
    from avo.gpus import resolve

    if not candidates.is_dir():
        raise UserError(f"--candidates {candidates} is not a folder: give the folder that holds "
                        f"<problem stem>/{sweep.SOLUTION_FILE} for each problem in {kernel_dir}")
    found = sweep.problems(kernel_dir)
    if not found:
        raise UserError(f"no problem files (*.py) in {kernel_dir}")
    profile = resolve(gpu, device)
    check_suite, bench_suite = suite_plan
    config = EvalConfig(seed=seed, check_suite=check_suite, bench_suite=bench_suite)
    say = (lambda line: print(line, file=sys.stderr, flush=True)) if as_json else (lambda line: print(line, flush=True))
    rows = []
    for i, problem in enumerate(found, start=1):
        row = score_problem(problem, candidates / problem.stem, profile=profile, device=device, config=config,
                            ops=ops, compile_too=compile_too, timed=bool(bench_suite))
        fitness = "" if row.fitness is None else f", fitness {row.fitness:.3f}"
        say(f"[{i}/{len(found)}] {problem.stem}: {row.status}{fitness}" + (f" ({row.reason})" if row.reason else ""))
        rows.append(row)
    clock = "interpreter (wall clock, not GPU performance)" if device == "interpret" else f"gpu ({profile.name})"
    if not bench_suite:
        clock = "untimed (correctness only)"
    data = sweep.summary(rows, title=f"avo bench: {kernel_dir} · solutions {candidates} · suite {suite}", clock=clock,
                         compile_asked=compile_too, folder=str(kernel_dir), candidates=str(candidates), device=device,
                         gpu=profile.name, ops=ops or "strict", suite=suite)
    if as_json:
        print(json.dumps(data, indent=2))
    else:
        sweep.render(data)
    return 0 if all(r.correct for r in rows) else 1


def score_problem(problem: Path, solution: Path, *, profile, device: str, config, ops: str | None, compile_too: bool,
                  timed: bool) -> sweep.Row:
    """One problem's row: its solution checked and timed against eager (and torch.compile), or why it could not be."""
    from avo.evaluate.harness import Evaluator
    from avo.tasks.kernelbench.spec import with_options

    stem = problem.stem
    spec = with_options(str(problem), ops=ops)
    loaded = load_problem(spec, device)
    if isinstance(loaded, sweep.Row):
        return loaded
    if not (solution / sweep.SOLUTION_FILE).is_file():
        return sweep.Row(stem, "missing", reason=f"no solution: {solution / sweep.SOLUTION_FILE} does not exist")
    result = Evaluator(spec, device=device, gpu=profile, config=config).evaluate(solution)
    row = sweep.row_of(stem, result, timed)
    row.evals["eager"] = result.model_dump(mode="json")
    if compile_too and row.correct and timed:
        compiled = Evaluator(with_options(spec, baseline="compile"), device=device, gpu=profile,
                             config=config).evaluate(solution)
        row.evals["compile"] = compiled.model_dump(mode="json")
        row.fitness_compile = compiled.fitness if compiled.ok else None
        if not compiled.ok:
            row.correct, row.status = False, compiled.status
            row.reason, row.message = "against torch.compile: " + sweep.reason_of(compiled), compiled.message
    return row


def load_problem(spec: str, device: str):
    """The task, or a `load_error` Row saying why the problem file cannot be scored."""
    from avo import tasks

    stem = Path(spec.partition("?")[0]).stem
    try:
        task = tasks.load(spec)
        task.preflight(device)
    except UserError as exc:
        return sweep.Row(stem, "load_error", reason=str(exc))
    except Exception as exc:  # a problem file can fail in ways of its own; the sweep goes on
        return sweep.Row(stem, "load_error", reason=first_line(exc))
    return task
