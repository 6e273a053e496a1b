"""`avo report RUN`: PNG figures and a Markdown summary of a run."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def report(
    run: str = typer.Argument(..., help="Run id, path, or 'latest'."),
    runs_dir: Path = typer.Option(Path("runs"), "--runs-dir", help="Folder holding the runs."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Folder for the report (default: the "
                                                                       "run's report/)."),
) -> None:
    """Figures (fitness over time and candidates, TFLOPS per case, status counts) and report.md."""
    from avo.report import write_report
    from avo.run import Run

    opened = Run.open(run, runs_dir)
    try:
        written = write_report(opened, output)
    finally:
        opened.close()
    for path in written:
        print(path)


def register(app: typer.Typer) -> None:
    app.command("report")(report)
