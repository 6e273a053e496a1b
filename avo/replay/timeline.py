"""A run's transcript as a timeline: model turns grouped into steps, each classified observe / orient / decide / act.

A step is one model turn with the tool calls it made and their results. Events outside turns (baseline, session
start, context reset, supervisor review, API waits, stop) become one-line markers. `Timeline.feed` takes events one by
one and hands back whatever they complete, so a finished transcript and a live one (`--follow`) render the same way.
Rendering lives in view.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path


OBSERVE_TOOLS = frozenset({"read_file", "list_files", "lineage", "diff", "profile", "inspect_compile", "search_docs",
                           "read_doc"})
ACT_TOOLS = frozenset({"edit_file", "write_file", "evaluate", "shell"})
ORIENT_TOOLS = frozenset({"note"})
STEP_EVENTS = ("model_turn", "tool_call", "tool_result")


@dataclass
class Call:
    id: str
    name: str
    arguments: dict
    raw_arguments: str | None = None
    content: str | None = None
    """The tool's answer; None until its result is recorded."""
    is_error: bool = False
    data: dict | None = None


@dataclass
class Step:
    number: int
    turn: dict
    calls: list[Call] = field(default_factory=list)
    best_cid: str | None = None
    best_fitness: float | None = None
    """Best fitness so far, after this step's evaluations."""

    @property
    def phase(self) -> str:
        names = {c.name for c in self.calls}
        if names & ACT_TOOLS:
            return "act"
        if names & OBSERVE_TOOLS:
            return "observe"
        if names & ORIENT_TOOLS:
            return "orient"
        return "decide"  # text only, or choosing where to start from (checkout)

    @property
    def complete(self) -> bool:
        return all(c.content is not None for c in self.calls)

    @property
    def evaluations(self) -> list[dict]:
        return [c.data for c in self.calls if c.name == "evaluate" and c.data and "status" in c.data]

    @property
    def elapsed_s(self) -> float | None:
        return self.turn.get("elapsed_s")


@dataclass
class Marker:
    kind: str
    event: dict


class Timeline:
    """Folds transcript events into steps and markers, tracking the best fitness so far."""

    def __init__(self):
        self.steps: list[Step] = []
        self.pending: Step | None = None
        self.held: list[Marker] = []
        """Markers that came while the pending step's calls were still running (a confirmation inside an
        `evaluate`): they follow that step."""
        self.best_cid: str | None = None
        self.best_fitness: float | None = None
        self.timing_source: str | None = None

    def feed(self, event: dict) -> list[Step | Marker]:
        kind = event.get("kind", "?")
        done: list[Step | Marker] = []
        if kind == "model_turn":
            done += self.flush()
            self.pending = self._open(event)
        elif kind in ("tool_call", "tool_result"):
            self._attach(event)
        elif kind != "stop" and self.pending is not None and not self.pending.complete:
            self.held.append(Marker(kind, event))  # the stop ends the run: no result comes for calls still open
        else:
            done += self.flush()
            if kind == "baseline" and event.get("status") == "correct":
                self.best_cid, self.best_fitness = event.get("cid"), event.get("fitness")
            done.append(Marker(kind, event))
        if self.pending is not None and self.pending.complete and kind != "tool_call":
            done += self.flush()
        return done

    def flush(self) -> list[Step | Marker]:
        """The step in progress, complete or not, and the markers held while it ran."""
        done: list[Step | Marker] = [self.pending] if self.pending is not None else []
        done += self.held
        self.pending, self.held = None, []
        return done

    def _open(self, event: dict) -> Step:
        step = Step(number=len(self.steps) + 1, turn=event, best_cid=self.best_cid, best_fitness=self.best_fitness)
        for c in event.get("tool_calls") or []:
            step.calls.append(Call(id=c.get("id", ""), name=c.get("name", "?"), arguments=c.get("arguments") or {},
                                   raw_arguments=c.get("raw_arguments")))
        self.steps.append(step)
        return step

    def _attach(self, event: dict) -> None:
        step = self.pending
        if step is None:  # a tool event with no turn before it (a truncated transcript): give it a step of its own
            step = self.pending = self._open({"kind": "model_turn", "text": "", "tool_calls": []})
        call = next((c for c in step.calls if c.id == event.get("id")), None)
        if call is None:
            call = Call(id=event.get("id", ""), name=event.get("name", "?"), arguments=event.get("arguments") or {})
            step.calls.append(call)
        if event["kind"] == "tool_result":
            call.content, call.is_error, call.data = event.get("content", ""), bool(event.get("is_error")), event.get(
                "data")
            info = call.data if call.name == "evaluate" and isinstance(call.data, dict) else None
            if info and "status" in info:
                self.best_cid, self.best_fitness = info.get("best_cid"), info.get("best_fitness")
                self.timing_source = info.get("timing_source") or self.timing_source
                step.best_cid, step.best_fitness = self.best_cid, self.best_fitness


def build(events: list[dict]) -> tuple[Timeline, list[Step | Marker]]:
    timeline, items = Timeline(), []
    for event in events:
        items += timeline.feed(event)
    items += timeline.flush()
    return timeline, items


def tail(path: Path, *, poll_s: float, sleep: Callable[[float], None] = time.sleep) -> Iterator[dict | None]:
    """Events as they are appended; None after each poll that found nothing new. Only whole lines are read: a
    partial last line is read again next poll from its start (a resumed run truncates a torn one and writes
    anew), and a whole line that is not JSON is a damaged transcript, refused as plain `avo replay` refuses it."""
    from avo.errors import UserError

    offset, number = 0, 0
    while True:
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
        except FileNotFoundError:
            chunk = b""
        *lines, _partial = chunk.split(b"\n")
        got = False
        for line in lines:
            offset += len(line) + 1
            number += 1
            if line.strip():
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    raise UserError(f"{path}: line {number} is not valid JSON") from None
                got = True
                yield event
        if not got:
            yield None
            sleep(poll_s)
