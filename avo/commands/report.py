"""`avo report RUN`: PNG figures and a Markdown summary of a run; `--html`: the web view's pages as one file."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def report(
    run: str = typer.Argument(..., help="Run id, path, or 'latest'."),
    runs_dir: Path = typer.Option(Path("runs"), "--runs-dir", help="Folder holding the runs."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Folder for the report (default: the "
                                                                       "run's report/; with --html, "
                                                                       "a file or a folder)."),
    html: bool = typer.Option(False, "--html", help="One self-contained HTML file (the run and candidate pages of "
                                                    "`avo serve`; no script, no network) instead of figures."),
) -> None:
    """Figures (fitness over time and candidates, TFLOPS per case, status counts) and report.md; or one HTML file."""
    from avo.report.build import write_report
    from avo.run.directory import Run

    opened = Run.open(run, runs_dir)
    try:
        if html:
            from avo.web.report import write_html

            written = [write_html(opened, output)]
        else:
            written = write_report(opened, output)
    finally:
        opened.close()
    for path in written:
        print(path)


def register(app: typer.Typer) -> None:
    app.command("report")(report)
