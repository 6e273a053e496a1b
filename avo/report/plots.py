"""The figures of `avo report`, drawn with matplotlib's object API on the Agg canvas (no display, no pyplot state).

Each figure carries a footer naming its provenance: the GPU the times came from, or the interpreter.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from avo.report.colors import ACCEPTED_COLOR, STATUS_COLOR

DPI = 100


def _figure(width_in: float, height_in: float) -> Figure:
    fig = Figure(figsize=(width_in, height_in), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _finish(fig: Figure, title: str, provenance: str, path: Path) -> Path:
    fig.suptitle(title, fontsize=13, fontweight="bold")
    fig.text(0.01, 0.005, provenance, fontsize=8.5, color="#444444", ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.03, 1, 0.97))
    fig.savefig(path, dpi=DPI)
    return path


def _best_so_far(points, x_of) -> tuple[list[float], list[float]]:
    """Step line through the accepted candidates: the best fitness as it stood at each point."""
    xs, ys, best = [], [], None
    for p in points:
        x = x_of(p)
        if x is None:
            continue
        if p.accepted:
            best = p.fitness
        if best is not None:
            xs.append(x)
            ys.append(best)
    return xs, ys


def fitness_figure(data, path: Path) -> Path:
    """Fitness of every candidate over wall time and over candidate index; accepted ones starred, best-so-far line."""
    fig = _figure(12, 8.5)
    hours = max((p.elapsed_s or 0.0) for p in data.points) > 2 * 3600 if data.points else False
    scale, unit = (3600.0, "h") if hours else (60.0, "min")
    panels = [(lambda p: None if p.elapsed_s is None else p.elapsed_s / scale,
               f"wall time of the run ({unit}; stopped periods left out)"),
              (lambda p: p.index, "candidate index")]
    for row, (x_of, label) in enumerate(panels):
        ax = fig.add_subplot(2, 1, row + 1)
        for status, color in STATUS_COLOR.items():
            chosen = [p for p in data.points if p.status == status and not p.accepted and x_of(p) is not None]
            if chosen:
                ax.scatter([x_of(p) for p in chosen], [p.fitness for p in chosen], s=22, color=color,
                           marker="o" if status == "correct" else "x", alpha=0.75,
                           label=f"{status}{', not accepted' if status == 'correct' else ''} ({len(chosen)})")
        accepted = [p for p in data.points if p.accepted and x_of(p) is not None]
        if accepted:
            ax.scatter([x_of(p) for p in accepted], [p.fitness for p in accepted], s=140, marker="*",
                       color=ACCEPTED_COLOR, edgecolor="black", linewidth=0.6, zorder=5,
                       label=f"accepted ({len(accepted)})")
            for p in accepted[-12:]:
                ax.annotate(p.cid, (x_of(p), p.fitness), textcoords="offset points", xytext=(4, 6), fontsize=8)
        xs, ys = _best_so_far(data.points, x_of)
        if xs:
            ax.step(xs, ys, where="post", color=ACCEPTED_COLOR, linewidth=1.8, label="best so far", zorder=4)
        if data.baseline_fitness:
            ax.axhline(data.baseline_fitness, color="#888888", linestyle="--", linewidth=1,
                       label=f"baseline {data.baseline_fitness:.4g}")
        ax.margins(y=0.15)  # room for the cid labels above the top points
        ax.set_xlabel(label)
        if row == 1:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel(f"fitness (geomean speedup\nvs {data.library or 'the library'})")
        ax.grid(True, alpha=0.3)
        if not data.points:
            ax.text(0.5, 0.5, "no candidates yet", ha="center", va="center", transform=ax.transAxes)
        else:
            ax.legend(loc="best", fontsize=8, ncol=2)
    return _finish(fig, f"run {data.run_id}: fitness ({data.task})", data.provenance, path)


def cases_figure(data, path: Path) -> Path:
    """Per-case TFLOPS: best vs baseline vs library, grouped horizontal bars (case names can be long)."""
    rows, same = data.case_rows, data.best_cid == data.baseline_cid
    series = [(f"best {data.best_cid}" + (" (= baseline)" if same else ""), "best", ACCEPTED_COLOR)]
    if not same:
        series.append((f"baseline {data.baseline_cid}", "baseline", "#9e9ac8"))
    series.append((data.library or "library", "library", "#636363"))
    fig = _figure(12, max(4.0, 1.5 + 0.25 * len(rows) * len(series)))
    ax = fig.add_subplot(1, 1, 1)
    if not rows:
        ax.text(0.5, 0.5, "no correct candidate with timed cases", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return _finish(fig, f"run {data.run_id}: TFLOPS per case", data.provenance, path)
    height = 0.8 / len(series)
    values = [v for r in rows for _, key, _ in series if (v := r[key])]
    for i, (label, key, color) in enumerate(series):
        ys = [n + (i - (len(series) - 1) / 2) * height for n in range(len(rows))]
        widths = [r[key] or 0.0 for r in rows]
        ax.barh(ys, widths, height=height, color=color, label=label)
        for y, w in zip(ys, widths):
            if w:
                ax.text(w, y, f" {w:.3g}", va="center", fontsize=7)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r["case"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    if values and max(values) / min(values) > 100:  # interpreter figures span many decades
        ax.set_xscale("log")
        ax.set_xlim(right=max(values) * 20)  # room for the value labels
    elif values:
        ax.set_xlim(0, max(values) * 1.12)
    ax.set_xlabel("TFLOPS" + (" (interpreter wall clock: not GPU performance)" if data.interpreter else ""))
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(series), fontsize=8, frameon=False)
    return _finish(fig, f"run {data.run_id}: TFLOPS per case, best vs baseline vs library", data.provenance, path)


def status_figure(data, path: Path) -> Path:
    """How many candidates ended in each status, and by which rule."""
    counts = data.status_counts
    fig = _figure(12, max(3.5, 1.4 + 0.4 * len(counts)))
    ax = fig.add_subplot(1, 1, 1)
    if not counts:
        ax.text(0.5, 0.5, "no candidates yet", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    else:
        labels = [f"{status} · {rule}" if rule else status for (status, rule), _ in counts]
        ax.barh(range(len(counts)), [n for _, n in counts], height=0.6,
                color=[STATUS_COLOR.get(status, "#999999") for (status, _), _ in counts])
        ax.set_ylim(len(counts) - 0.5, -0.5)
        ax.set_xlim(0, max(n for _, n in counts) * 1.1)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        for y, (_, n) in enumerate(counts):
            ax.text(n, y, f" {n}", va="center", fontsize=9)
        ax.set_yticks(range(len(counts)))
        ax.set_yticklabels(labels, fontsize=9)
        ax.set_xlabel(f"candidates ({sum(n for _, n in counts)} in all)")
        ax.grid(True, axis="x", alpha=0.3)
    return _finish(fig, f"run {data.run_id}: candidates by status and rule", data.provenance, path)
