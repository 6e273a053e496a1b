"""The run page's figures as inline SVG, drawn here so that no chart library or network is needed to see them.

Every point and node links to its candidate's page and carries a `<title>` (the browser's hover text): the
candidate, its status and fitness, its rationale and its result. All text goes through MarkupSafe's `escape`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from markupsafe import Markup, escape

from avo.report.colors import ACCEPTED_COLOR, STATUS_COLOR
from avo.util.format import one_line

WIDTH, HEIGHT = 920, 280
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 14, 42
ROW = 20
INDENT = 16


def _ticks(low: float, high: float, n: int = 5) -> list[float]:
    if high <= low:
        return [low]
    raw = (high - low) / n
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = -(-low // step) * step
    return [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]


def _hover(p) -> str:
    rationale = one_line(p.rationale or "(no rationale recorded)", 400)
    accepted = ", accepted" if p.accepted else ""
    return f"{p.cid} · {p.status}{accepted} · fitness {p.fitness:.4g}\n{rationale}\nresult: {p.summary}"


def fitness_chart(points, x_of: Callable, x_label: str, link: Callable[[str], str], baseline: float | None,
                  chart_id: str) -> Markup:
    """Fitness of every candidate over `x_of(point)`; accepted ones ringed in green, the best-so-far as a step line."""
    shown = [p for p in points if x_of(p) is not None]
    out = [f'<svg class="chart" id="{chart_id}" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
           f'role="img" xmlns="http://www.w3.org/2000/svg">']
    if not shown:
        out.append(f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">no candidates yet</text></svg>')
        return Markup("".join(out))
    xs, ys = [x_of(p) for p in shown], [p.fitness for p in shown] + ([baseline] if baseline else [])
    x_lo, x_hi = min(xs), max(xs)
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    y_hi = max(ys) * 1.1 or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    sx = lambda x: LEFT + (x - x_lo) / (x_hi - x_lo) * plot_w  # noqa: E731
    sy = lambda y: TOP + plot_h - y / y_hi * plot_h  # noqa: E731
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#bbb"/>')
    for t in _ticks(0, y_hi):
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" stroke="#eee"/>'
                   f'<text x="{LEFT - 6}" y="{sy(t) + 4:.1f}" text-anchor="end" class="tick">{t:.3g}</text>')
    for t in _ticks(x_lo, x_hi):
        out.append(f'<text x="{sx(t):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle" class="tick">{t:.4g}</text>')
    out.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 6}" text-anchor="middle">{escape(x_label)}</text>'
               f'<text x="14" y="{TOP + plot_h / 2}" text-anchor="middle" transform="rotate(-90 14 '
               f'{TOP + plot_h / 2})">fitness</text>')
    if baseline:
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{sy(baseline):.1f}" y2="{sy(baseline):.1f}" '
                   f'stroke="#888" stroke-dasharray="5 4"><title>baseline {baseline:.4g}</title></line>')
    best, path = None, []
    for p in sorted(shown, key=x_of):
        if p.accepted:
            best = p.fitness
        if best is not None:
            x, y = sx(x_of(p)), sy(best)
            path.append(f"H{x:.1f} V{y:.1f}" if path else f"M{x:.1f} {y:.1f}")
    if path:
        out.append(f'<path d="{" ".join(path)} H{WIDTH - RIGHT}" fill="none" stroke="{ACCEPTED_COLOR}" '
                   f'stroke-width="1.8"/>')
    for p in shown:
        color = STATUS_COLOR.get(p.status, "#999")
        ring = f'stroke="{ACCEPTED_COLOR}" stroke-width="3"' if p.accepted else 'stroke="#fff" stroke-width="1"'
        out.append(f'<a href="{escape(link(p.cid))}"><circle class="pt" data-cid="{escape(p.cid)}" '
                   f'cx="{sx(x_of(p)):.1f}" cy="{sy(p.fitness):.1f}" r="{6 if p.accepted else 4.5}" fill="{color}" '
                   f'{ring}><title>{escape(_hover(p))}</title></circle></a>')
    out.append("</svg>")
    return Markup("".join(out))


def _order(points) -> list[tuple[object, int]]:
    """(point, depth) in depth-first order, children by candidate index; a parent not in the run makes a root."""
    known = {p.cid for p in points}
    children: dict[str | None, list] = {}
    for p in points:
        children.setdefault(p.parent if p.parent in known else None, []).append(p)
    ordered, stack = [], [(p, 0) for p in reversed(children.get(None, []))]
    while stack:  # iterative: a week's chain of accepted steps is deeper than Python's recursion limit
        p, depth = stack.pop()
        ordered.append((p, depth))
        stack += [(c, depth + 1) for c in reversed(children.get(p.cid, []))]
    return ordered


def lineage_tree(points, link: Callable[[str], str], best: str | None, baseline: str | None) -> Markup:
    """Parent -> child, one row per candidate: a node coloured by status (ringed when accepted), its id, fitness,
    labels for best and baseline, and its result."""
    ordered = _order(points)
    y_of = {p.cid: TOP + i * ROW + ROW / 2 for i, (p, _) in enumerate(ordered)}
    x_of = {p.cid: 12 + depth * INDENT for p, depth in ordered}
    height = TOP * 2 + ROW * max(len(ordered), 1)
    width = max(WIDTH, max(x_of.values(), default=0) + 640)
    out = [f'<svg class="tree" id="tree" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
           f'xmlns="http://www.w3.org/2000/svg">']
    for p, _ in ordered:
        if p.parent in y_of:
            out.append(f'<path d="M{x_of[p.parent]} {y_of[p.parent]:.0f} V{y_of[p.cid]:.0f} H{x_of[p.cid]}" '
                       f'fill="none" stroke="#999"/>')
    for p, _ in ordered:
        x, y = x_of[p.cid], y_of[p.cid]
        color = STATUS_COLOR.get(p.status, "#999")
        ring = f'stroke="{ACCEPTED_COLOR}" stroke-width="3"' if p.accepted else 'stroke="#fff" stroke-width="1"'
        labels = "".join(f'<tspan class="label {name}" dx="6">{name}</tspan>'
                         for name, at in (("best", best), ("baseline", baseline)) if at == p.cid)
        said = p.summary if p.status != "correct" else p.rationale
        out.append(f'<a href="{escape(link(p.cid))}"><g class="node" id="node-{escape(p.cid)}" '
                   f'data-status="{escape(p.status)}" data-accepted="{str(p.accepted).lower()}">'
                   f'<title>{escape(_hover(p))}</title>'
                   f'<circle cx="{x}" cy="{y:.0f}" r="{6 if p.accepted else 5}" fill="{color}" {ring}/>'
                   f'<text x="{x + 12}" y="{y + 4:.0f}"><tspan class="cid">{escape(p.cid)}</tspan>'
                   f'<tspan dx="8">{escape(p.status)}</tspan><tspan dx="8">{p.fitness:.4g}</tspan>{labels}'
                   f'<tspan dx="10" class="result">{escape(one_line(said, 100))}</tspan></text></g></a>')
    out.append("</svg>")
    return Markup("".join(out))
