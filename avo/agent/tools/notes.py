"""The `note` tool: the agent's memory, a file in the run that is carried across context resets and resumes."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from pydantic import Field

from avo.agent.tools.base import Tool, ToolArgs, ToolContext


class NoteArgs(ToolArgs):
    text: str = Field(description="What to remember: findings, dead ends, ideas to try (kept across context resets)")


def note(ctx: ToolContext, args: NoteArgs):
    """Append to the run's notes file, the memory that survives context resets and resumes."""
    path = Path(ctx.run.notes_path)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")
    with path.open("a") as f:
        f.write(f"- [{stamp}] {args.text.strip()}\n")
    return f"noted ({len(args.text)} chars)", {"chars": len(args.text)}


def tools() -> list[Tool]:
    return [Tool("note", NoteArgs, note)]
