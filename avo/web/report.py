"""`avo report --html`: the run page and every candidate page in one file that needs nothing else to open.

The stylesheet is inlined, the figures are inline SVG, and the page's own Content-Security-Policy allows no script
and no network at all, so it opens on an air-gapped node and is safe to attach to a bug report.
"""

from __future__ import annotations

from pathlib import Path

from avo.util.atomic import write_text_atomic
from avo.errors import UserError
from avo.web.pages import report_page


def write_html(run, path: Path | None = None) -> Path:
    """Write the report to `path` (default: the run's report/report.html); returns where it went."""
    out = Path(path) if path is not None else run.report_dir / "report.html"
    if out.is_dir():
        out = out / f"{run.id}.html"
    if not len(run.lineage):
        raise UserError(f"run {run.id} has no candidates yet: nothing to report")
    text = report_page(run)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(out, text)
    except OSError as exc:
        raise UserError(f"cannot write the report to {out}: {exc.strerror or exc}") from None
    return out
