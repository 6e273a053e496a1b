"""Replay backend: re-issues a recorded transcript's model turns, in order, against the current run (a script).

The tools run for real, so a replay re-scores the recorded edits on this machine. Supervisor turns (asked for
with no tools) are answered from the recorded supervisor turns. When the recorded turns run out, the run ends.
"""

from __future__ import annotations

import json
from pathlib import Path

from avo.agent.models.base import ToolCall, Turn
from avo.agent.models.scripted import ScriptedModel
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


class ReplayModel(ScriptedModel):
    def __init__(self, source: str | Path):
        path = Path(source)
        if path.is_dir():
            path = path / "transcript.jsonl"
        if not path.is_file():
            raise UserError(f"nothing to replay: {source} is neither a transcript nor a run directory")
        self.path = path
        turns = read_turns(path, "model_turn")
        if not turns:
            raise UserError(f"{path} holds no model turns to replay")
        recorded = next((t.model for t in turns if t.model), "unknown")
        super().__init__(turns, reviews=read_turns(path, "supervisor"), name=f"replay:{recorded}",
                         exhausted=f"replayed every recorded turn of {path}", no_review="(no recorded review)",
                         keep_requests=False)
