"""`avo replay RUN`: the run as a timeline; one step in full; a live run followed; re-scored here; re-driven."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from avo.errors import UserError


def replay(
    run: str = typer.Argument(..., help="Run id, path, or 'latest'."),
    runs_dir: Path = typer.Option(Path("runs"), "--runs-dir", help="Folder holding the runs."),
    step: Optional[int] = typer.Option(None, "--step", help="Show step N in full: arguments and results."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Watch a live run until it stops (Ctrl-C to leave)."),
    rebench: bool = typer.Option(False, "--rebench", help="Re-score the accepted candidates on this machine."),
    all_candidates: bool = typer.Option(False, "--all", help="With --rebench: every candidate, not only accepted."),
    redrive: bool = typer.Option(False, "--redrive", help="Run the recorded model turns again, as a new run."),
    device: Optional[str] = typer.Option(None, "--device", help="cuda or interpret (default: the run's own)."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="auto, h100, h200 or b200 (default: detected)."),
    quiet: bool = typer.Option(False, "--quiet", help="With --redrive: plain log lines instead of the dashboard."),
) -> None:
    """The run as a timeline: each step's phase, tool calls, rationale, result and the best fitness so far."""
    from avo.replay import view as timeline
    from avo.run.directory import Run

    modes = [name for name, on in (("--step", step is not None), ("--follow", follow), ("--rebench", rebench),
                                   ("--redrive", redrive)) if on]
    if len(modes) > 1:
        raise UserError(f"{' and '.join(modes)} cannot be combined: choose one")
    if all_candidates and not rebench:
        raise UserError("--all goes with --rebench")
    if (device or gpu) and not (rebench or redrive):
        raise UserError("--device and --gpu go with --rebench or --redrive")
    opened = Run.open(run, runs_dir)
    console = timeline.console_for()
    try:
        if step is not None:
            timeline.show_step(opened, step, console)
        elif follow:
            try:
                why = timeline.follow(opened, console)
            except KeyboardInterrupt:
                why = "stopped watching (the run itself goes on)"
            console.print(why)
        elif rebench:
            from avo.replay.rebench import rebench as rescore, show_rescores

            rows = rescore(opened, everything=all_candidates, device=device, gpu=gpu,
                           progress=lambda line: print(line, file=sys.stderr, flush=True))
            show_rescores(console, opened, rows)
        elif redrive:
            from avo.commands.evolve import evolve
            from avo.replay.rebench import redrive_settings

            settings = redrive_settings(opened, runs_dir=runs_dir, device=device, gpu=gpu)
            raise typer.Exit(evolve(overrides=settings, config_file=None, resume=None, quiet=quiet))
        else:
            timeline.show_timeline(opened, console)
    finally:
        opened.close()


def register(app: typer.Typer) -> None:
    app.command("replay")(replay)
