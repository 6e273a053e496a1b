"""Replay backend: re-issues a recorded transcript's model turns, in order, against the current run.

The tools run for real, so a replay re-scores the recorded edits on this machine. Supervisor turns (asked for
with no tools) are answered from the recorded supervisor turns. When the recorded turns run out, the run ends.
"""

from __future__ import annotations

import json
from pathlib import Path

from avo.agent.models.base import Message, ToolCall, ToolSpec, Turn
from avo.agent.stops import ModelExhausted
from avo.errors import UserError


def read_turns(path: Path, kind: str) -> list[Turn]:
    """Recorded turns of one kind ('model_turn' or 'supervisor'); a torn last line (crash) is skipped."""
    turns = []
    for line in path.read_text().splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if event.get("kind") != kind:
            continue
        calls = [ToolCall.model_validate(c) for c in event.get("tool_calls", [])]
        turns.append(Turn(text=event.get("text", ""), tool_calls=calls, stop_reason=event.get("stop_reason"),
                          model=event.get("model", "")))
    return turns


class ReplayModel:
    def __init__(self, source: str | Path):
        path = Path(source)
        if path.is_dir():
            path = path / "transcript.jsonl"
        if not path.is_file():
            raise UserError(f"nothing to replay: {source} is neither a transcript nor a run directory")
        self.path = path
        self.turns = read_turns(path, "model_turn")
        self.reviews = read_turns(path, "supervisor")
        if not self.turns:
            raise UserError(f"{path} holds no model turns to replay")
        recorded = next((t.model for t in self.turns if t.model), "unknown")
        self.name = f"replay:{recorded}"

    def next_turn(self, system: str, messages: list[Message], tools: list[ToolSpec]) -> Turn:
        if not tools:  # a supervisor turn
            return self.reviews.pop(0) if self.reviews else Turn(text="(no recorded review)", model=self.name)
        if not self.turns:
            raise ModelExhausted(f"replayed every recorded turn of {self.path}")
        return self.turns.pop(0)
