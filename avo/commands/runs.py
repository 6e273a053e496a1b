"""`avo runs`, `avo show`, `avo diff`, `avo rollback`, `avo export`, `avo import`: looking at and moving runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from avo.util.format import number

RUNS_DIR = typer.Option(Path("runs"), "--runs-dir", help="Folder holding the runs.")


def _console():
    from rich.console import Console

    # piped output keeps whole lines rather than rich's 80-column default
    return Console() if sys.stdout.isatty() else Console(width=200, soft_wrap=True)


def _fitness(value, device: str) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}x" + (" (interp)" if device == "interpret" else "")


def register(app: typer.Typer) -> None:
    app.command("runs")(runs)
    app.command("show")(show)
    app.command("diff")(diff)
    app.command("rollback")(rollback)
    app.command("export")(export)
    app.command("import")(import_)


def runs(runs_dir: Path = RUNS_DIR) -> None:
    """List the runs: task, GPU, agent, candidates ok/failed, best fitness, state."""
    from rich.table import Table

    from avo.errors import UserError
    from avo.run.directory import list_runs

    table = Table("run", "task", "GPU", "agent", "candidates ok/failed", "best fitness", "state", "started",
                  title=f"runs in {runs_dir}")
    unreadable: list = []
    found = list_runs(runs_dir, unreadable)
    for path, why in unreadable:  # a run whose run.json is damaged is shown, not hidden
        table.add_row(path.name, "?", "?", "?", "?", "?", f"unreadable: {why}", "")
    for run in found:
        try:
            row = run.summary()
        except UserError as exc:  # one damaged run must not hide the others
            info = run.info()
            table.add_row(run.id, info.get("task", "?"), info.get("gpu", "?"), info.get("agent", "?"), "?", "?",
                          f"unreadable: {exc}", info.get("started", "")[:19])
            continue
        finally:
            run.close()
        table.add_row(row["id"], row["task"], row["gpu"], row["agent"], f"{row['ok']}/{row['failed']}",
                      _fitness(row["best_fitness"], row["device"]), row["state"], row["started"][:19])
    console = _console()
    console.print(table if found or unreadable else f"no runs in {runs_dir}")


def show(run: str = typer.Argument(..., help="Run id, path, or 'latest'."),
         cid: str | None = typer.Argument(None, help="A candidate: cid, best, baseline, cid^ or a git revision."),
         runs_dir: Path = RUNS_DIR) -> None:
    """A run's summary, or one candidate: status, fitness, per-case results, rationale, files."""
    from avo.run.directory import Run

    opened = Run.open(run, runs_dir)
    try:
        if cid is None:
            _show_run(opened)
        else:
            _show_candidate(opened, cid)
    finally:
        opened.close()


def _show_run(run) -> None:
    from rich.table import Table

    from avo.tasks.workload import recorded

    row, lineage, info = run.summary(), run.lineage, run.info()
    console = _console()
    console.print(f"[bold]{run.id}[/]  task {row['task']}  GPU {row['gpu']}  device {row['device']}  "
                  f"agent {row['agent']}  state {row['state']}")
    console.print(f"started {info.get('started', '?')}  updated {info.get('updated', '?')}  path {run.path}")
    workload = recorded(info.get("config"))
    if workload is not None:
        console.print(f"workload {workload.describe()}", markup=False)
    console.print(f"candidates {row['candidates']} ({row['ok']} correct, {row['failed']} failed), "
                  f"{row['accepted']} accepted; best {row['best'] or '-'} "
                  f"{_fitness(row['best_fitness'], row['device'])}; baseline {lineage.baseline or '-'}; "
                  f"main {lineage.main or '-'}")
    table = Table("cid", "parent", "status", "fitness", "accepted", "model", "scored on", "summary",
                  title="latest candidates")
    for c in lineage.log(limit=15):
        table.add_row(c.cid, c.parent or "-", c.status, f"{c.fitness:.3f}", "yes" if c.accepted else "",
                      c.model, _placement(lineage.record(c.cid).get("eval", {})), c.summary)
    console.print(table)


def _placement(ev: dict) -> str:
    """Which worker (GPU, CPU worker) and node scored a candidate, from its committed record; '-' before avo kept it."""
    from avo.evaluate.result import placement

    return placement(ev.get("worker") or "", ev.get("node") or "") or "-"


def _show_candidate(run, rev: str) -> None:
    from rich.table import Table

    lineage = run.lineage
    cid = lineage.resolve(rev)
    c, record = lineage.info(cid), lineage.record(cid)
    ev = record.get("eval", {})
    marks = [name for name, at in (("best", lineage.best), ("baseline", lineage.baseline),
                                   ("main", lineage.main)) if at == cid]
    console = _console()
    console.print(f"{cid} {' '.join(f'[{m}]' for m in marks)}  parent {c.parent or '-'}  model {c.model}  "
                  f"created {c.created}  commit {c.sha[:12]}", markup=False, highlight=False)
    rule = f" ({ev['rule']})" if ev.get("rule") else ""
    scored = _placement(ev)
    where = f"  scored on {scored}" if scored != "-" else ""
    console.print(f"status {c.status}{rule}  fitness {c.fitness:.3f}  accepted {'yes' if c.accepted else 'no'}  "
                  f"timing {ev.get('timing_source', '?')} on {ev.get('gpu') or ev.get('device') or '?'}{where}")
    if ev.get("message"):
        console.print(f"message: {ev['message']}", markup=False)
    if ev.get("cases"):
        table = Table("suite", "case", "correct", "rel err", "ms", "TFLOPS", "library TFLOPS", "speedup",
                      title=f"cases ({ev.get('timing_source', '?')} timing)")
        for case in ev["cases"]:
            correct = {True: "yes", False: "NO"}.get(case.get("correct"), "-")
            table.add_row(case.get("suite", ""), case.get("case", ""), correct, number(case.get("rel_err"), ".2e"),
                          number(case.get("ms"), ".3f"), number(case.get("tflops"), ".1f"),
                          number(case.get("library_tflops"), ".1f"), number(case.get("speedup"), ".3f"))
        console.print(table)
    console.print("rationale:", markup=False)
    console.print(c.rationale or "(none)", markup=False)
    console.print("files: " + ", ".join(f"{path} ({size} B)" for path, size in lineage.files(cid)), markup=False)


def diff(a: str = typer.Argument(..., help="best, baseline, a cid, cid^, or a git revision."),
         b: str = typer.Argument(..., help="Same forms as A."),
         run: str = typer.Option("latest", "--run", help="Run id, path, or 'latest'."),
         stat: bool = typer.Option(False, "--stat", help="Changed files only."),
         as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
         runs_dir: Path = RUNS_DIR) -> None:
    """Code diff A -> B (avo.json left out), per-case TFLOPS of A and B with their ratio, and both statuses."""
    from avo.run.directory import Run

    opened = Run.open(run, runs_dir)
    try:
        lineage = opened.lineage
        cid_a, cid_b = lineage.resolve(a), lineage.resolve(b)
        text = lineage.diff(cid_a, cid_b, stat=stat)
        ev_a, ev_b = lineage.record(cid_a).get("eval", {}), lineage.record(cid_b).get("eval", {})
    finally:
        opened.close()
    cases = _case_ratios(ev_a, ev_b)
    if as_json:
        side = lambda rev, cid, ev: {"rev": rev, "cid": cid, **{k: ev.get(k) for k in (  # noqa: E731
            "status", "rule", "fitness", "timing_source", "gpu", "device")}}
        print(json.dumps({"run": opened.id, "a": side(a, cid_a, ev_a), "b": side(b, cid_b, ev_b),
                          "cases": cases, "diff": text}, indent=1))
        return
    _print_diff(opened.id, (a, cid_a, ev_a), (b, cid_b, ev_b), text, cases, stat)


def _case_ratios(ev_a: dict, ev_b: dict) -> list[dict]:
    """Timed cases of A and B side by side; ratio = TFLOPS of A / TFLOPS of B."""
    by_key = lambda ev: {(c.get("suite"), c.get("case")): c for c in ev.get("cases", [])  # noqa: E731
                         if c.get("tflops") is not None}
    cases_a, cases_b = by_key(ev_a), by_key(ev_b)
    rows = []
    for key in [*cases_a, *(k for k in cases_b if k not in cases_a)]:
        ta, tb = cases_a.get(key, {}).get("tflops"), cases_b.get(key, {}).get("tflops")
        rows.append({"suite": key[0], "case": key[1], "tflops_a": ta, "tflops_b": tb,
                     "ratio": ta / tb if ta is not None and tb else None})
    return rows


def _print_diff(run_id: str, side_a: tuple, side_b: tuple, text: str, cases: list[dict], stat: bool) -> None:
    from rich.syntax import Syntax
    from rich.table import Table

    console = _console()
    for label, (rev, cid, ev) in (("A", side_a), ("B", side_b)):
        rule = f" ({ev['rule']})" if ev.get("rule") else ""
        console.print(f"{label} = {rev} = {cid}: {ev.get('status', '?')}{rule}, fitness {ev.get('fitness', 0):.3f}, "
                      f"{ev.get('timing_source', '?')} timing on {ev.get('gpu') or ev.get('device') or '?'}",
                      markup=False, highlight=False)
    if not text.strip():
        console.print("(no differences in the candidates' files)")
    elif console.is_terminal and not stat:
        console.print(Syntax(text, "diff", theme="ansi_dark", background_color="default", word_wrap=True))
    else:
        console.print(text.rstrip("\n"), markup=False, highlight=False)
    if cases:
        sources = {side_a[2].get("timing_source", "?"), side_b[2].get("timing_source", "?")}
        table = Table("suite", "case", f"TFLOPS A ({side_a[1]})", f"TFLOPS B ({side_b[1]})", "A/B",
                      title=f"run {run_id}, {' vs '.join(sorted(sources))} timing")
        for row in cases:
            table.add_row(row["suite"] or "", row["case"] or "", number(row["tflops_a"], ".1f"),
                          number(row["tflops_b"], ".1f"), number(row["ratio"], ".3f"))
        console.print(table)
    else:
        console.print("no timed cases in A or B")


def rollback(run: str = typer.Argument(..., help="Run id, path, or 'latest'."),
             cid: str = typer.Argument(..., help="The candidate main and the workspace go back to."),
             runs_dir: Path = RUNS_DIR) -> None:
    """Move main and the run's working copy back to CID. Every candidate stays in the lineage."""
    from avo.run.directory import Run

    opened = Run.open(run, runs_dir)
    try:
        with opened.lock():
            lineage = opened.lineage
            target, previous = lineage.resolve(cid), lineage.main
            lineage.rollback(target)
            lineage.checkout(target, opened.workspace)
            opened.append_event("rollback", cid=target, previous_main=previous)
    finally:
        opened.close()
    print(f"{opened.id}: main and workspace now at {target} (main was {previous or '-'})")


def export(run: str = typer.Argument(..., help="Run id, path, or 'latest'."),
           output: Path = typer.Option(..., "-o", "--output", help="The file to write (a tar)."),
           runs_dir: Path = RUNS_DIR) -> None:
    """Write the run as one file: a git bundle of its lineage plus its JSON files and transcript."""
    from avo.run.directory import Run
    from avo.run.archive import export_run

    opened = Run.open(run, runs_dir)
    try:
        export_run(opened, output)
    finally:
        opened.close()
    print(f"{opened.id} -> {output} ({output.stat().st_size} bytes)")


def import_(file: Path = typer.Argument(..., help="A file written by `avo export`."),
            runs_dir: Path = RUNS_DIR) -> None:
    """Recreate an exported run under --runs-dir."""
    from avo.run.archive import import_run

    run = import_run(file, runs_dir)
    print(f"imported {run.id} into {runs_dir} ({len(run.lineage)} candidates)")
    run.close()
