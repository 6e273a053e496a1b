"""report.md of `avo report`: the run in a page a person can read or paste into a pull request."""

from __future__ import annotations

from avo.util.format import clock, number


def _cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _quote(text: str) -> list[str]:
    lines = (text or "(no rationale recorded)").strip().splitlines() or ["(no rationale recorded)"]
    return [f"> {line}".rstrip() for line in lines]


def budget_line(data) -> str:
    budget = (data.info.get("config") or {}).get("budget") or {}
    progress = data.last_progress
    hours = budget.get("hours")
    parts = [f"{clock(progress.get('elapsed_s'))} of {hours:g} h" if isinstance(hours, (int, float))
             else clock(progress.get("elapsed_s"))]
    candidates = progress.get("candidates", sum(1 for p in data.points if p.parent is not None))
    parts.append(f"{candidates} candidates" + (f" of {budget['max_candidates']}" if budget.get("max_candidates")
                                               else ""))
    cost = progress.get("cost_usd_total")
    parts.append(f"${cost or 0:.2f}" + (f" of ${budget['max_cost']:g}" if budget.get("max_cost") else ""))
    return ", ".join(parts)


def markdown(data, lineage) -> str:
    info = data.info
    best, base = data.best_eval, data.baseline_eval
    source = "interpreter (Triton on CPU, wall clock: not GPU performance)" if data.interpreter else (
        f"GPU {best.versions.get('gpu_device') or best.gpu} (CUDA events)" if best is not None else "-")
    lines = [f"# avo run {data.run_id}", "", f"_{data.provenance}_", "", "| | |", "|---|---|",
             f"| task | {_cell(data.task)} |", f"| GPU | {_cell(info.get('gpu', '?'))} |",
             f"| device | {_cell(info.get('device', '?'))} |", f"| agent | {_cell(info.get('agent', '?'))} |",
             f"| timing source | {_cell(source)} |", f"| library | {_cell(data.library or '-')} |",
             f"| state | {_cell(info.get('state', '?'))}"
             + (f" ({_cell(info['reason'])})" if info.get("reason") else "") + " |",
             f"| budget used | {_cell(budget_line(data))} |"]
    if data.workload:
        lines.append(f"| workload | {_cell(data.workload)} (weighted geomean over its cases) |")
    if data.best_cid and best is not None:
        lines.append(f"| best | **{data.best_cid}**, fitness {best.fitness:.4g} (geomean speedup vs "
                     f"{_cell(best.library or 'the library')}) |")
    else:
        lines.append("| best | none: no correct candidate |")
    if data.baseline_cid:
        lines.append(f"| baseline | {data.baseline_cid}, "
                     + (f"fitness {base.fitness:.4g} |" if base is not None and base.ok else
                        f"{base.status if base is not None else 'not evaluated'} |"))
    if best is not None and data.baseline_fitness:
        lines.append(f"| best / baseline | {best.fitness / data.baseline_fitness:.3f}x |")
    lines += ["", "![fitness over time and candidates](fitness.png)", "",
              "![TFLOPS per case](cases.png)", "", "![candidates by status](status.png)", ""]
    lines += _cases_section(data) + _accepted_section(data, lineage) + _status_section(data) + _usage_section(data)
    return "\n".join(lines).rstrip() + "\n"


def _cases_section(data) -> list[str]:
    if not data.case_rows:
        return []
    lines = [f"## Per case: best {data.best_cid} vs baseline {data.baseline_cid} vs library", "",
             "| case | best TFLOPS | baseline TFLOPS | library TFLOPS | best speedup vs library |",
             "|---|---:|---:|---:|---:|"]
    for r in data.case_rows:
        lines.append(f"| {_cell(r['case'])} | {number(r['best'])} | {number(r['baseline'])} | {number(r['library'])} | "
                     f"{number(r['speedup'])} |")
    return [*lines, ""]


def _accepted_section(data, lineage) -> list[str]:
    accepted = [p for p in data.points if p.accepted]
    lines = [f"## Accepted steps ({len(accepted)})", ""]
    previous = None
    for p in accepted:
        gain = f", {p.fitness / previous.fitness:.3f}x over {previous.cid}" if previous and previous.fitness else ""
        mark = " (baseline)" if p.cid == data.baseline_cid else ""
        mark += " (best)" if p.cid == data.best_cid else ""
        lines.append(f"### {p.cid}{mark}: fitness {p.fitness:.4g}{gain}")
        lines.append("")
        if previous is not None:
            stat = lineage.diff(previous.cid, p.cid, stat=True).strip("\n")
            lines += [f"Changes from {previous.cid}:", "", "```", stat or "(no file changes)", "```", ""]
        lines += [*_quote(p.rationale), ""]
        previous = p
    if not accepted:
        lines += ["No candidate was accepted.", ""]
    return lines


def _status_section(data) -> list[str]:
    lines = ["## Candidates by status", "", "| status | rule | candidates |", "|---|---|---:|"]
    for (status, rule), n in data.status_counts:
        lines.append(f"| {status} | {_cell(rule or '-')} | {n} |")
    return [*lines, ""]


def _usage_section(data) -> list[str]:
    u = data.usage
    tokens = sum(u.get(k, 0) for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"))
    cost = data.last_progress.get("cost_usd_total")
    if not tokens and not cost:
        return []
    return ["## Model usage", "", "| turns | input tokens | output tokens | cache read | cache write | cost (USD) |",
            "|---:|---:|---:|---:|---:|---:|",
            f"| {u.get('turns', 0)} | {u.get('input_tokens', 0)} | {u.get('output_tokens', 0)} | "
            f"{u.get('cache_read_tokens', 0)} | {u.get('cache_write_tokens', 0)} | {cost or 0:.2f} |", ""]
