"""HTML of the runs, run and candidate pages: Jinja2 templates with autoescape on.

`Links` is the only difference between the served pages (one URL per page) and the report file (one anchor per
section), so both show the same pages.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup
from pygments.formatters import HtmlFormatter

from avo.report.build import gather
from avo.report.colors import STATUS_COLOR
from avo.report.markdown import budget_line
from avo.util.format import number
from avo.web import model, svg

TEXT_LIMIT = 20_000
"""Characters of one tool result shown on a page; the transcript keeps the whole."""


@dataclass(frozen=True)
class Links:
    standalone: bool = False

    def runs(self) -> str:
        return "/"

    def run(self, run_id: str) -> str:
        return "#run" if self.standalone else f"/run/{run_id}/"

    def candidate(self, run_id: str, cid: str) -> str:
        return f"#{cid}" if self.standalone else f"/run/{run_id}/{cid}"


@lru_cache(maxsize=1)
def _env() -> Environment:
    env = Environment(loader=PackageLoader("avo.web", "templates"), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["clip"] = lambda text, n=TEXT_LIMIT: text if len(text) <= n else text[:n] + f"\n... ({len(text) - n} "\
                                                                                          "more characters)"
    env.filters["pretty"] = lambda value: json.dumps(value, indent=1, ensure_ascii=False, default=str)
    env.filters["num"] = number
    env.globals["status_color"] = STATUS_COLOR
    return env


@lru_cache(maxsize=1)
def stylesheet() -> str:
    own = resources.files("avo.web").joinpath("static/avo.css").read_text()
    return own + "\n" + HtmlFormatter(style="friendly").get_style_defs(".highlight")


def live_script() -> str:
    return resources.files("avo.web").joinpath("static/live.js").read_text()


def render(template: str, **context) -> str:
    context.setdefault("links", Links())
    context.setdefault("live", None)
    context.setdefault("inline_css", None)
    return _env().get_template(template).render(**context)


def runs_page(rows: list[dict], runs_dir: str, live: str | None) -> str:
    return render("runs.html", rows=rows, runs_dir=runs_dir, live=live, title="avo runs")


def run_context(run, links: Links) -> dict:
    data = gather(run)
    row = model.run_row(run)
    link = lambda cid: links.candidate(run.id, cid)  # noqa: E731
    hours = max((p.elapsed_s or 0.0) for p in data.points) > 2 * 3600 if data.points else False
    scale, unit = (3600.0, "h") if hours else (60.0, "min")
    time_chart = svg.fitness_chart(data.points, lambda p: None if p.elapsed_s is None else p.elapsed_s / scale,
                                   f"wall time of the run ({unit})", link, data.baseline_fitness, "chart-time")
    index_chart = svg.fitness_chart(data.points, lambda p: p.index, "candidate index", link, data.baseline_fitness,
                                    "chart-index")
    tree = svg.lineage_tree(data.points, link, data.best_cid, data.baseline_cid)
    return {"run": run, "data": data, "row": row, "budget": budget_line(data), "time_chart": time_chart,
            "index_chart": index_chart, "tree": tree, "links": links,
            "counts": {s: sum(p.status == s for p in data.points) for s in STATUS_COLOR}}


def run_page(run, live: str | None) -> str:
    return render("run.html", live=live, title=f"avo run {run.id}", **run_context(run, Links()))


def candidate_page(run, cid: str, history: model.History, live: str | None) -> str:
    return render("candidate.html", live=live, title=f"{cid} of avo run {run.id}", run=run,
                  c=model.candidate(run, cid, history), links=Links())


def report_page(run) -> str:
    """The run page and every candidate page in one document: sections shown by anchor, no script at all."""
    links = Links(standalone=True)
    context = run_context(run, links)
    history = model.history(run.events())
    candidates = [model.candidate(run, p.cid, history) for p in context["data"].points]
    return render("report.html", title=f"avo run {run.id}", inline_css=Markup(stylesheet()),
                  candidates=candidates, **context)
