"""A folder of KernelBench problems scored (or evolved) one by one, summed up as KernelBench's users report it.

`problems(folder)` lists the problem files; each gets a `Row`: correct, fitness against eager PyTorch (and against
torch.compile when asked), or the reason it has none (no solution, the file does not load, the seed failed). fast_p
is KernelBench's headline number: the fraction of all problems that are correct and more than p times faster than
the baseline (for p = 0, the fraction correct). A problem that cannot be scored counts as not correct; it never ends
the sweep.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from avo.util.format import number

FAST_P = (0.0, 1.0, 1.5, 2.0)
SOLUTION_FILE = "kernel.py"


@dataclass
class Row:
    problem: str
    """The problem file's stem, as KernelBench names solutions (`SOLUTIONS/<stem>/kernel.py`)."""
    status: str
    """An EvalResult status, or `missing` (no solution), `load_error` (the problem file does not load), `failed`."""
    correct: bool = False
    fitness: float | None = None
    """Geometric-mean speedup over eager PyTorch on the bench cases; None when not timed."""
    fitness_compile: float | None = None
    """The same against torch.compile(Model), when asked."""
    reason: str = ""
    """One line for the table."""
    message: str = ""
    """The whole message behind `reason` (a crashed worker's stderr tail included), for the JSON."""
    run: str | None = None
    """The evolve run of this problem (folder evolves only)."""
    extra: dict[str, Any] = field(default_factory=dict)
    evals: dict[str, Any] = field(default_factory=dict)
    """The EvalResults behind the row, as JSON, by baseline (`eager`, `compile`); folder benches only."""


def _natural(path: Path) -> tuple:
    return tuple(int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", path.stem))


def problems(folder: Path) -> list[Path]:
    """The problem files in `folder`, in KernelBench's order (1_, 2_, ..., 10_)."""
    return sorted((p for p in Path(folder).glob("*.py") if not p.name.startswith(("_", "."))), key=_natural)


def fast_p(rows: list[Row], p: float, key: str = "fitness") -> float:
    """Fraction of all rows that are correct and more than p times faster (key: fitness or fitness_compile)."""
    if not rows:
        return 0.0
    hits = [r for r in rows if r.correct and (p == 0.0 or (getattr(r, key) or 0.0) > p)]
    return len(hits) / len(rows)


def fast_p_table(rows: list[Row], key: str = "fitness") -> dict[str, float]:
    return {f"{p:g}": round(fast_p(rows, p, key), 4) for p in FAST_P}


def reason_of(result: Any) -> str:
    """One line saying why a result is not correct: its message's first line, and for a worker that died, the last
    line of its stderr tail too (the exception that ended it, where Python printed one)."""
    from avo.util.procs import STDERR_MARK

    if result.ok:
        return ""
    head, _, tail = result.message.strip().partition(STDERR_MARK)
    reason = (head.strip().splitlines() or [""])[0]
    last = next((line.strip() for line in reversed(tail.splitlines()) if line.strip()), "")
    return (f"{reason[:200]}: {last[:200]}" if last else reason)[:400]


def row_of(problem: str, result: Any, timed: bool) -> Row:
    """A Row from an EvalResult."""
    return Row(problem=problem, status=result.status, correct=result.ok,
               fitness=result.fitness if timed and result.ok else None, reason=reason_of(result),
               message="" if result.ok else result.message, extra={"timing_source": result.timing_source,
                                                                    "ops": result.ops,
                                                                    "library_precision": result.library_precision})


def summary(rows: list[Row], *, title: str, clock: str, compile_asked: bool, **facts: Any) -> dict[str, Any]:
    """The sweep as JSON: its facts (folder, device, GPU, ...), the rows, and fast_p (also against torch.compile)."""
    data: dict[str, Any] = {"title": title, "clock": clock, **facts, "problems": len(rows),
                            "correct": sum(r.correct for r in rows), "rows": [asdict(r) for r in rows],
                            "fast_p": fast_p_table(rows)}
    if compile_asked:
        data["fast_p_compile"] = fast_p_table(rows, "fitness_compile")
    return data


def render(data: dict[str, Any], out: Any = None) -> None:
    """The summary table and the fast_p line, as a person reads them."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=out) if out is not None else Console()
    if not console.is_terminal:
        console = Console(file=out, width=max(console.width, 140))
    table = Table(title=f"{data['title']} · times: {data['clock']}")
    compile_asked = "fast_p_compile" in data
    headers = ["problem", "correct", "fitness vs eager"] + (["vs compile"] if compile_asked else [])
    headers += ["run"] if any(r["run"] for r in data["rows"]) else []
    # fp32: against the library as configured; tf32: against it with TF32 allowed (evaluate/worker/precision.py)
    headers += ["library as"] if any(r["extra"].get("library_precision") for r in data["rows"]) else []
    for header in [*headers, "status / reason"]:
        table.add_column(header, justify="left" if header in ("problem", "run", "status / reason") else "right")
    for r in data["rows"]:
        cells = [r["problem"], "yes" if r["correct"] else "NO", number(r["fitness"], ".3f")]
        cells += [number(r["fitness_compile"], ".3f")] if compile_asked else []
        cells += [r["run"] or "-"] if "run" in headers else []
        cells += [r["extra"].get("library_precision") or "-"] if "library as" in headers else []
        cells.append(r["status"] + (f": {r['reason']}" if r["reason"] else ""))
        table.add_row(*cells)
    console.print(table)
    for key, against in (("fast_p", "eager"), ("fast_p_compile", "torch.compile")):
        if key in data:
            parts = ", ".join(f"fast_{p} {v:.2f}" for p, v in data[key].items())
            console.print(f"{parts} (vs {against}; {data['correct']}/{data['problems']} correct)", markup=False)
