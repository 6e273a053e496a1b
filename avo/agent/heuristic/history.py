"""What the heuristic agent knows, rebuilt from the conversation alone.

The agent keeps no state between turns: every turn it replays the messages (its own tool calls and their results)
to learn what the workspace holds, which points were evaluated with what outcome, which candidate is the best and
what the profiles said. The same transcript therefore always leads to the same next step, and a restarted
conversation (a context reset or a resume) continues from the lineage tool's data plus whatever it re-reads.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from avo.agent.heuristic.knobs import Point, parse_knobs, parse_point_tag, point_of
from avo.agent.models.base import Message, ToolCall

KERNEL = "kernel.py"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def point_from_text(text: str | None) -> Point | None:
    if text is None:
        return None
    knobs = parse_knobs(text)
    return point_of(knobs) if knobs else None


@dataclass
class Outcome:
    """One evaluated point, from an evaluate result in this conversation or a lineage row."""

    cid: str | None
    point: Point | None
    status: str
    fitness: float
    accepted: bool
    message: str = ""
    buckets: dict[str, list[float]] = field(default_factory=dict)
    """bucket -> [its fitness here, the best's then], where the kernel has a per-shape table."""


@dataclass
class History:
    text: str | None = None
    """kernel.py in the workspace as far as the agent knows it (None: must be read)."""
    workspace_cid: str | None = None
    """Candidate whose files the workspace holds unedited; None once edited."""
    texts: dict[str, str] = field(default_factory=dict)
    """kernel.py of candidates seen in this conversation, by cid."""
    outcomes: list[Outcome] = field(default_factory=list)
    evaluated_hashes: set[str] = field(default_factory=set)
    lineage: dict | None = None
    best_cid: str | None = None
    best_fitness: float = 0.0
    baseline_cid: str | None = None
    accepted_points: list[Point] = field(default_factory=list)
    """Incumbents accepted in this conversation, oldest first (the last move that paid gives momentum)."""
    profiles: list[tuple[str | None, dict]] = field(default_factory=list)
    compiles: list[tuple[str | None, dict]] = field(default_factory=list)
    calls: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    last_edit_rationale: str = ""
    finished: bool = False
    """The agent already said it was done (a turn with no tool calls)."""

    @classmethod
    def replay(cls, messages: list[Message]) -> "History":
        h = cls()
        pending: dict[str, tuple[ToolCall, str]] = {}
        for message in messages:
            if message.role == "assistant":
                h.finished = not message.tool_calls and message.text.startswith("Done")
                for call in message.tool_calls:
                    pending[call.id] = (call, message.text)
                continue
            for result in message.tool_results:
                call, turn_text = pending.pop(result.call_id, (None, ""))
                if call is None:
                    continue
                h.calls[call.name] += 1
                if result.is_error:
                    h.errors[call.name] += 1
                    if call.name in ("edit_file", "write_file", "checkout"):
                        h.text, h.workspace_cid = None, None  # the workspace is no longer what we think
                    continue
                h._apply(call, result.data or {}, turn_text)
        return h

    def _apply(self, call: ToolCall, data: dict[str, Any], turn_text: str) -> None:
        args, name = call.arguments, call.name
        if name == "read_file" and _is_kernel(data.get("path", args.get("path", ""))):
            self.text = data.get("text", self.text)
            if self.workspace_cid is not None and self.text is not None:
                self.texts[self.workspace_cid] = self.text
        elif name == "write_file" and _is_kernel(args.get("path", "")):
            self.text, self.workspace_cid = args.get("content"), None
            self.last_edit_rationale = turn_text
        elif name == "edit_file" and _is_kernel(args.get("path", "")):
            if self.text is not None:
                old, new = args.get("old", ""), args.get("new", "")
                self.text = self.text.replace(old, new) if args.get("replace_all") else self.text.replace(old, new, 1)
            self.workspace_cid = None
            self.last_edit_rationale = turn_text
        elif name == "checkout":
            self.workspace_cid = data.get("cid")
            self.text = self.texts.get(self.workspace_cid or "")
        elif name == "evaluate":
            self._evaluated(data)
        elif name == "lineage":
            self._lineage(data)
        elif name == "profile":
            self.profiles.append((self.workspace_cid, data))
        elif name == "inspect_compile":
            self.compiles.append((self.workspace_cid, data))

    def _evaluated(self, data: dict[str, Any]) -> None:
        cid = data.get("duplicate_of") or data.get("cid")
        point = point_from_text(self.text)
        if self.text is not None:
            self.evaluated_hashes.add(text_hash(self.text))
            if cid:
                self.texts[cid] = self.text
        self.workspace_cid = cid
        accepted = bool(data.get("accepted"))
        self.outcomes.append(Outcome(cid, point, str(data.get("status")), float(data.get("fitness") or 0.0),
                                     accepted, str(data.get("message") or ""), dict(data.get("buckets") or {})))
        if accepted and point is not None:
            self.accepted_points.append(point)
        if data.get("best_cid"):
            self.best_cid = data["best_cid"]
            self.best_fitness = float(data.get("best_fitness") or 0.0)

    def _lineage(self, data: dict[str, Any]) -> None:
        self.lineage = data
        self.best_cid = data.get("best") or self.best_cid
        self.baseline_cid = data.get("baseline") or self.baseline_cid
        for row in data.get("candidates", []):
            if row.get("cid") == self.best_cid:
                self.best_fitness = float(row.get("fitness") or 0.0)

    def lineage_outcomes(self) -> list[Outcome]:
        """Candidates the lineage lists, with their points: from the rationale's tag, or from a text read here."""
        found = []
        for row in (self.lineage or {}).get("candidates", []):
            cid = row.get("cid")
            point = point_from_text(self.texts.get(cid)) if cid in self.texts else None
            point = point or parse_point_tag(str(row.get("rationale") or ""))
            found.append(Outcome(cid, point, str(row.get("status")), float(row.get("fitness") or 0.0),
                                 bool(row.get("accepted")), str(row.get("summary") or ""),
                                 dict(row.get("buckets") or {})))
        return found

    def all_outcomes(self) -> list[Outcome]:
        """Lineage rows first, then this conversation's evaluations (newer facts override older ones)."""
        return self.lineage_outcomes() + self.outcomes

    def per_candidate(self) -> list[Outcome]:
        """One outcome per candidate (its newest report), in the order the candidates were made."""
        by_cid = {o.cid: o for o in self.all_outcomes() if o.cid}
        return [by_cid[cid] for cid in sorted(by_cid)]

    def profile_of(self, cids: list[str | None]) -> tuple[dict | None, dict | None]:
        """The newest profile and compile data taken of any of `cids` (best first)."""
        def newest(items):
            for cid in cids:
                for taken_of, data in reversed(items):
                    if taken_of == cid and cid is not None:
                        return data
            return None
        return newest(self.profiles), newest(self.compiles)


def _is_kernel(path: str) -> bool:
    return path.replace("\\", "/").removeprefix("./") == KERNEL
