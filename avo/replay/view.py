"""Terminal rendering of a run's timeline (`avo replay`): compact steps, one step in full, a live run followed."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from avo.errors import UserError
from avo.replay.timeline import Call, Marker, Step, Timeline, build, tail
from avo.util import format as fmt
from avo.util.format import clock, headline, one_line

PHASE_STYLE = {"observe": "cyan", "orient": "magenta", "decide": "yellow", "act": "bold green"}


def console_for(out=None) -> Console:
    # piped output keeps whole lines rather than rich's 80-column default
    console = Console(file=out)
    return console if console.is_terminal else Console(file=out, width=160, soft_wrap=False)


def call_brief(call: Call) -> str:
    """`read_file(kernel.py)`: the one argument that says what the call was about."""
    args = call.arguments or {}
    key = {"read_file": "path", "write_file": "path", "edit_file": "path", "list_files": "path", "checkout": "cid",
           "search_docs": "query", "read_doc": "id", "profile": "case", "note": "text", "shell": "command"}.get(
        call.name)
    if call.name == "diff":
        inner = f"{args.get('a', '?')}..{args.get('b', '?')}"
    elif key and key in args:
        inner = one_line(args[key], 40)
    else:
        inner = ""
    mark = " ✗" if call.is_error else ""
    return f"{call.name}({inner}){mark}" if inner else f"{call.name}{mark}"


def evaluation_text(info: dict) -> Text:
    cid = info.get("cid", "?")
    if info.get("duplicate_of"):
        return Text(f"→ {cid}: duplicate of {info['duplicate_of']}, not re-evaluated", style="dim")
    status = info.get("status", "?")
    if status == "correct":
        text = Text(f"→ {cid} correct, fitness {fmt.number(info.get('fitness'))}", style="green")
        text.append("  ACCEPTED" if info.get("accepted") else "  not accepted",
                    style="bold green" if info.get("accepted") else "dim")
    else:
        rule = f" {info['rule']}" if info.get("rule") else ""
        first = one_line(headline(info.get("message") or ""), 110)
        text = Text(f"→ {cid} {status}{rule}" + (f": {first}" if first else ""), style="red")
    if info.get("suspicious"):
        text.append("  SUSPICIOUS", style="bold yellow")
    return text


def render_step(console: Console, step: Step) -> None:
    head = Text(f"{step.number:>4}  {clock(step.elapsed_s):>8}  ")
    head.append(f"{step.phase:<7}", style=PHASE_STYLE[step.phase])
    head.append("  " + (" ".join(call_brief(c) for c in step.calls) or "(no tool call)"))
    if not step.complete:
        head.append("  …running", style="dim")
    head.append(f"   best {step.best_cid or '-'} {fmt.number(step.best_fitness)}", style="dim")
    console.print(head)
    indent = " " * 17
    text = (step.turn.get("text") or "").strip()
    if text:
        console.print(Text(indent + one_line(text, 200), style="italic"))
    for info in step.evaluations:
        console.print(Text(indent) + evaluation_text(info))


def render_marker(console: Console, marker: Marker) -> None:
    e, kind = marker.event, marker.kind
    if kind == "baseline":
        line = f"baseline {e.get('cid')}: {e.get('summary', e.get('status'))}"
    elif kind == "session":
        line = f"session started: agent {e.get('agent')}" + (" (resumed)" if e.get("resumed") else "")
    elif kind == "context_reset":
        line = f"context reset at {clock(e.get('elapsed_s'))}: {one_line(e.get('reason', ''), 160)}"
    elif kind == "supervisor":
        line = f"supervisor review: {one_line(e.get('text', ''), 180)}"
    elif kind == "api_wait":
        line = f"API paused: {one_line(e.get('reason', ''), 100)}; retry {e.get('attempt')} in {e.get('delay_s')} s"
    elif kind == "api_resumed":
        line = f"API back after {e.get('failed_attempts')} failed attempt(s)"
    elif kind == "stop":
        line = f"stop ({e.get('state')}) at {clock(e.get('elapsed_s'))}: {e.get('reason')}"
    else:
        shown = {k: v for k, v in e.items() if k not in ("ts", "kind")}
        line = f"{kind}: {one_line(json.dumps(shown, default=str), 160)}"
    console.print(Text(f"   ── {line}", style="bold" if kind == "stop" else "dim"))


def render(console: Console, item: Step | Marker) -> None:
    (render_step if isinstance(item, Step) else render_marker)(console, item)


def header(run) -> str:
    info = run.info()
    device = info.get("device", run.config.device)
    where = f"{info.get('gpu', '?')}" + (" · interpreter timings (CPU wall clock)" if device == "interpret" else "")
    return (f"run {run.id} · task {info.get('task', '?')} · {where} · agent {info.get('agent', '?')} · "
            f"state {info.get('state', '?')}")


def show_timeline(run, console: Console) -> None:
    timeline, items = build(run.events())
    console.print(Text(header(run), style="bold"))
    console.print(Text(f"{'step':>4}  {'elapsed':>8}  {'phase':<7}  tool calls / rationale / result", style="dim"))
    for item in items:
        render(console, item)
    evaluated = sum(len(s.evaluations) for s in timeline.steps)
    source = f" [{timeline.timing_source}]" if timeline.timing_source not in (None, "gpu") else ""
    console.print(Text(f"{len(timeline.steps)} steps, {evaluated} evaluations; best {timeline.best_cid or '-'} "
                       f"fitness {fmt.number(timeline.best_fitness)}{source}. One step in full: "
                       f"avo replay {run.id} --step N", style="bold"))


def show_step(run, number: int, console: Console) -> None:
    timeline, _ = build(run.events())
    if not 1 <= number <= len(timeline.steps):
        raise UserError(f"step {number} is out of range: run {run.id} has {len(timeline.steps)} steps (1 to "
                        f"{len(timeline.steps)})" if timeline.steps else f"run {run.id} has no steps yet")
    step, turn = timeline.steps[number - 1], timeline.steps[number - 1].turn
    usage = turn.get("usage") or {}
    cost = f", ${turn['cost_usd']:.4f}" if turn.get("cost_usd") else ""
    console.print(Text(f"step {number} of {len(timeline.steps)} · {step.phase} · elapsed {clock(step.elapsed_s)} · "
                       f"model {turn.get('model', '?')} · {usage.get('input_tokens', 0)} in / "
                       f"{usage.get('output_tokens', 0)} out tokens{cost} · {turn.get('ts', '')}", style="bold"))
    console.print(Text("rationale:", style="bold"))
    console.print(Text((turn.get("text") or "(no text)").rstrip()), soft_wrap=True)
    for i, call in enumerate(step.calls, 1):
        console.print(Text(f"\ncall {i}: {call.name}", style="bold cyan"))
        console.print(Text(call.raw_arguments if call.raw_arguments is not None
                           else json.dumps(call.arguments, indent=1, ensure_ascii=False)), soft_wrap=True)
        label = "result (error)" if call.is_error else "result"
        console.print(Text(f"{label}:", style="bold red" if call.is_error else "bold"))
        console.print(Text("(no result recorded)" if call.content is None else call.content.rstrip()), soft_wrap=True)
        if call.name == "evaluate" and call.data and call.data.get("cases"):
            console.print(cases_table(call.data))
    console.print(Text(f"\nbest after this step: {step.best_cid or '-'} fitness {fmt.number(step.best_fitness)}",
                       style="bold"))


def cases_table(info: dict) -> Table:
    num = fmt.number
    table = Table("suite", "case", "correct", "rel err", "ms", "lib ms", "TFLOPS", "lib TFLOPS", "speedup",
                  title=escape(f"{info.get('cid')} per case ({info.get('timing_source', '?')} timing)"))
    for c in info.get("cases", []):
        correct = {True: "yes", False: "NO"}.get(c.get("correct"), "-")
        table.add_row(escape(str(c.get("suite", ""))), escape(str(c.get("case", ""))), correct,
                      num(c.get("rel_err"), ".2e"), num(c.get("ms"), ".4g"), num(c.get("library_ms"), ".4g"),
                      num(c.get("tflops"), ".4g"), num(c.get("library_tflops"), ".4g"), num(c.get("speedup"), ".4g"))
    return table


def follow(run, console: Console, *, poll_s: float = 0.5, sleep: Callable[[float], None] = time.sleep) -> str:
    """Print the timeline so far, then each step as it completes, until a `stop` event ends the run."""
    console.print(Text(header(run), style="bold"))
    timeline, caught_up, last_kind = Timeline(), False, None
    for event in tail(run.transcript_path, poll_s=poll_s, sleep=sleep):
        if event is None:
            if not caught_up:
                caught_up = True
                if last_kind == "stop" and run.lock_holder() is None:
                    return "the run had already stopped"
                holder = run.lock_holder()
                console.print(Text("   ── following; Ctrl-C to stop watching" + (
                    "" if holder else " (no process holds this run now: it continues when resumed)"), style="dim"))
            continue
        last_kind = event.get("kind")
        for item in timeline.feed(event):
            render(console, item)
        if caught_up and last_kind == "stop":
            return "the run stopped"
