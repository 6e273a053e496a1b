"""What a person watching a run sees: a rich Live dashboard on a terminal, plain log lines otherwise.

The loop hands every recorded event to `event(kind, data)`; the view keeps only what it displays.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from datetime import datetime

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from avo.util.format import number


def short_args(arguments: dict | None) -> str:
    if not arguments:
        return ""
    parts = []
    for key, value in arguments.items():
        text = str(value).replace("\n", " ")
        parts.append(f"{key}={text[:40] + '...' if len(text) > 40 else text}")
    return " ".join(parts)


class RunView:
    def __init__(self, *, title: str, hours: float, max_candidates: int | None = None, quiet: bool = False,
                 out=None):
        self.title, self.hours, self.max_candidates = title, hours, max_candidates
        self.out = out or sys.stdout
        self.plain = quiet or not self.out.isatty()
        self.console = Console(file=self.out)
        self.live: Live | None = None
        self.elapsed_s, self.elapsed_at, self.cost = 0.0, time.monotonic(), 0.0
        self.ok = self.failed = 0
        self.best_cid, self.best_fitness, self.best_cases, self.timing_source = None, 0.0, [], "none"
        self.action, self.pause, self.stopping = "starting", None, False
        self.results: deque[str] = deque(maxlen=8)

    def __enter__(self) -> RunView:
        if not self.plain:
            self.live = Live(self, console=self.console, refresh_per_second=2, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)
            self.live = None

    def set_best(self, cid: str | None, result) -> None:
        if cid is None or result is None:
            return
        self.best_cid, self.best_fitness = cid, result.fitness
        self.best_cases = [c.model_dump() for c in result.bench_cases()]
        self.timing_source = result.timing_source

    def event(self, kind: str, data: dict) -> None:
        if "elapsed_s" in data:
            self.elapsed_s, self.elapsed_at = data["elapsed_s"], time.monotonic()
        self.cost = data.get("cost_usd_total", self.cost)
        line = self._absorb(kind, data)
        if line and self.plain:
            stamp = datetime.now().strftime("%H:%M:%S")
            print(f"[{stamp}] {line}", file=self.out, flush=True)

    def _absorb(self, kind: str, data: dict) -> str | None:
        if kind == "model_turn":
            self.pause, self.action = None, "running tools" if data.get("tool_calls") else "thinking"
            names = ", ".join(c["name"] for c in data.get("tool_calls", [])) or "no tool call"
            return f"model: {names}" + (f" (${data['cost_usd']:.4f})" if data.get("cost_usd") else "")
        if kind == "tool_call":
            self.action = f"{data['name']} {short_args(data.get('arguments'))}".strip()
            return None if data["name"] != "evaluate" else f"evaluating: {short_args(data.get('arguments'))}"
        if kind == "tool_result":
            self.action = "asking the model"
            info = data.get("data") or {}
            if data["name"] == "evaluate" and "status" in info and not info.get("duplicate_of"):
                return self._evaluated(info)
            return f"{data['name']} error: {data['content'][:160]}" if data.get("is_error") else None
        if kind == "api_wait":
            self.pause = f"API paused: {data['reason']}, retry {data['attempt']} in {data['delay_s']:.0f}s"
            return self.pause
        if kind == "api_resumed":
            self.pause = None
            return f"API back after {data['failed_attempts']} failed attempt(s)"
        if kind == "confirm_end" and data.get("resumed"):
            text = f"{data.get('cid')}: confirmation cut short by the stop, finished now: {data.get('verdict')}"
            self.results.appendleft(text)
            return text
        if kind in ("context_reset", "supervisor", "stop", "baseline", "session"):
            text = {"context_reset": "context reset: " + data.get("reason", ""),
                    "supervisor": "supervisor: " + data.get("text", "").strip().replace("\n", " ")[:200],
                    "stop": f"stopped ({data.get('state')}): {data.get('reason')}",
                    "baseline": f"baseline {data.get('cid')}: {data.get('summary')}",
                    "session": f"session started, agent {data.get('agent')}"}[kind]
            self.results.appendleft(text)
            return text
        return None

    def _evaluated(self, info: dict) -> str:
        if info["status"] == "correct":
            self.ok += 1
        else:
            self.failed += 1
        if info.get("accepted"):
            self.best_cid, self.best_fitness = info["cid"], info["fitness"]
            self.best_cases = [c for c in info.get("cases", []) if c.get("speedup") is not None]
            self.timing_source = info.get("timing_source", "none")
        detail = f"fitness {info['fitness']:.4g}" if info["status"] == "correct" else (info.get("rule") or "")
        where = f" on {info['worker']}" if info.get("worker") else ""
        text = (f"{info['cid']}: {info['status']} {detail}{' ACCEPTED' if info.get('accepted') else ''}{where} "
                f"(best {info.get('best_cid')} {info.get('best_fitness', 0.0):.4g})")
        verdict = info.get("verdict", "")
        faster = info["status"] == "correct" and info["fitness"] > info.get("best_fitness", 0.0)
        if faster and not info.get("accepted") and verdict:
            text += f": {verdict.removeprefix('not accepted: ')}"  # why a faster-looking one was not taken
        self.results.appendleft(text)
        return text

    def __rich__(self) -> Group:
        elapsed = self.elapsed_s + (time.monotonic() - self.elapsed_at)
        head = Table.grid(padding=(0, 2))
        head.add_row(Text(self.title, style="bold"),
                     f"{elapsed / 3600:.2f} / {self.hours:g} h",
                     f"candidates {self.ok} ok, {self.failed} failed" + (
                         f" (max {self.max_candidates})" if self.max_candidates else ""),
                     f"${self.cost:.2f}")
        best = Text(f"best {self.best_cid or '-'}: fitness {self.best_fitness:.4g}"
                    + ("" if self.timing_source == "gpu" else f" [{self.timing_source}]"), style="green")
        cases = Table("case", "TFLOPS", "library", "speedup", box=None, padding=(0, 1))
        for c in self.best_cases[:12]:
            cases.add_row(str(c.get("case")), number(c.get("tflops"), ".1f"), number(c.get("library_tflops"), ".1f"),
                          number(c.get("speedup"), ".3f"))
        status = Text(f"now: {self.action}" + ("  (stopping after this step)" if self.stopping else ""))
        parts = [head, best, cases, status]
        if self.pause:
            parts.append(Text(self.pause, style="bold yellow"))
        parts.extend(Text(line, style="dim") for line in self.results)
        return Group(*parts)


