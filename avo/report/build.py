"""`avo report`: a run's figures (PNG) and a Markdown summary, from its lineage, evaluations and transcript.

Written to runs/<id>/report/ (or any folder): fitness.png (fitness over wall time and over candidate index, accepted
steps marked, best-so-far line), cases.png (per-case TFLOPS of best vs baseline vs library), status.png (candidates
by status and rule) and report.md. Every figure and the summary name where the times came from.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from avo.errors import UserError
from avo.evaluate.result import EvalResult
from avo.replay.rebench import recorded_eval

@dataclass
class Point:
    cid: str
    index: int
    parent: str | None
    status: str
    rule: str | None
    fitness: float
    accepted: bool
    elapsed_s: float | None
    rationale: str
    summary: str = ""
    """The evaluation in one line (EvalResult.summary), or the commit's summary when no evaluation is recorded."""


@dataclass
class ReportData:
    run_id: str
    info: dict
    points: list[Point]
    best_cid: str | None
    baseline_cid: str | None
    best_eval: EvalResult | None
    baseline_eval: EvalResult | None
    provenance: str
    interpreter: bool
    library: str = ""
    case_rows: list[dict] = field(default_factory=list)
    status_counts: list[tuple[tuple[str, str | None], int]] = field(default_factory=list)
    usage: dict = field(default_factory=dict)
    last_progress: dict = field(default_factory=dict)

    @property
    def task(self) -> str:
        return str(self.info.get("task", "?"))

    @property
    def workload(self) -> str | None:
        """The run's workload in one line (its own cases timed instead of the bench suite), or None."""
        from avo.tasks.workload import recorded

        found = recorded(self.info.get("config"))
        return found.describe() if found else None

    @property
    def baseline_fitness(self) -> float | None:
        return self.baseline_eval.fitness if self.baseline_eval is not None and self.baseline_eval.ok else None


def gather(run) -> ReportData:
    lineage, events = run.lineage, run.events()
    elapsed = _elapsed_by_cid(events)
    started = _parse_time(run.info().get("started"))
    points, evals = [], {}
    for c in lineage.log()[::-1]:
        result = recorded_eval(run, c.cid)
        evals[c.cid] = result
        when = elapsed.get(c.cid)
        if when is None and started is not None and _parse_time(c.created) is not None:
            when = max(0.0, (_parse_time(c.created) - started).total_seconds())
        points.append(Point(cid=c.cid, index=int(c.cid[1:]), parent=c.parent, status=c.status,
                            rule=result.rule if result else None, fitness=c.fitness, accepted=c.accepted,
                            elapsed_s=when, rationale=c.rationale,
                            summary=result.summary() if result else c.summary))
    best, baseline = lineage.best, lineage.baseline
    best_eval, baseline_eval = evals.get(best), evals.get(baseline)
    shown = [r for r in (best_eval, baseline_eval) if r is not None] or [r for r in evals.values() if r]
    data = ReportData(run_id=run.id, info=run.info(), points=points, best_cid=best, baseline_cid=baseline,
                      best_eval=best_eval, baseline_eval=baseline_eval, provenance="", interpreter=False)
    data.interpreter = any(r.timing_source == "interpreter" for r in shown) or (
        not shown and data.info.get("device") == "interpret")
    data.library = next((r.library for r in shown if r.library), "")
    data.provenance = provenance(data, shown)
    data.case_rows = _case_rows(best_eval, baseline_eval)
    counts = Counter((p.status, p.rule if p.status != "correct" else None) for p in points)
    data.status_counts = sorted(counts.items(), key=lambda item: (item[0][0] != "correct", -item[1], str(item[0])))
    data.usage, data.last_progress = _usage(events)
    return data


def provenance(data: ReportData, results: list[EvalResult]) -> str:
    """Where the figures' times came from, in one line: the GPU's name, or the interpreter."""
    gpus = sorted({r.versions.get("gpu_device") or r.gpu for r in results if r.timing_source == "gpu"})
    if gpus:
        source = f"timed on GPU {', '.join(gpus)} (CUDA events)"
    elif data.interpreter:
        source = (f"timed by the interpreter (Triton on CPU, wall clock: not GPU performance; GPU label "
                  f"{data.info.get('gpu', '?')})")
    else:
        source = "no timed candidate"
    started = str(data.info.get("started", ""))[:10]
    return f"run {data.run_id} · task {data.task} · {source} · library {data.library or '-'} · started {started}"


def _elapsed_by_cid(events: list[dict]) -> dict[str, float]:
    """Seconds of run time at which each candidate's evaluation finished (the baseline at 0)."""
    found: dict[str, float] = {}
    for e in events:
        if e.get("kind") == "baseline" and e.get("cid"):
            found.setdefault(e["cid"], 0.0)
        data = e.get("data")
        if e.get("kind") == "tool_result" and e.get("name") == "evaluate" and isinstance(data, dict):
            if data.get("cid") and not data.get("duplicate_of") and e.get("elapsed_s") is not None:
                found.setdefault(data["cid"], float(e["elapsed_s"]))
    return found


def _parse_time(text):
    try:
        return datetime.fromisoformat(str(text))
    except ValueError:
        return None


def _case_rows(best: EvalResult | None, baseline: EvalResult | None) -> list[dict]:
    if best is None or not best.ok:
        return []
    base = {(c.suite, c.case): c for c in baseline.bench_cases()} if baseline is not None and baseline.ok else {}
    rows = []
    for c in best.bench_cases():
        b = base.get((c.suite, c.case))
        rows.append({"case": c.case, "suite": c.suite, "best": c.tflops, "baseline": b.tflops if b else None,
                     "library": c.library_tflops, "speedup": c.speedup})
    return rows


def _usage(events: list[dict]) -> tuple[dict, dict]:
    totals = Counter()
    last: dict = {}
    for e in events:
        if e.get("kind") in ("model_turn", "supervisor"):
            totals["turns"] += 1
            for key, value in (e.get("usage") or {}).items():
                if isinstance(value, (int, float)):
                    totals[key] += value
        if "elapsed_s" in e:
            last.update({k: e[k] for k in ("elapsed_s", "cost_usd_total", "candidates") if k in e})
    return dict(totals), last


def write_report(run, out_dir: Path | None = None) -> list[Path]:
    """Draw the figures and write report.md; returns the files written."""
    from avo.report.markdown import markdown
    from avo.report.plots import cases_figure, fitness_figure, status_figure

    out = Path(out_dir) if out_dir is not None else run.report_dir
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot write the report to {out}: {exc.strerror or exc}") from None
    data = gather(run)
    if not data.points:
        raise UserError(f"run {run.id} has no candidates yet: nothing to report")
    written = [fitness_figure(data, out / "fitness.png"), cases_figure(data, out / "cases.png"),
               status_figure(data, out / "status.png")]
    md = out / "report.md"
    md.write_text(markdown(data, run.lineage))
    return [*written, md]
