"""A run's transcript.jsonl: the append-only event log, one JSON object per line, flushed and fsynced per event.

A process killed mid-write leaves a partial last line. Before its first append a writer cuts that torn tail, so the
next event does not run into it; readers leave it out. A damaged line anywhere else is an error, not skipped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from avo.errors import UserError


class Transcript:
    def __init__(self, path: Path, default: Callable | None = None):
        self.path = path
        self._default = default
        """json.dumps' fallback for values JSON has no type for."""
        self._checked = False

    def append(self, event: dict) -> None:
        """One line, on disk before this returns."""
        if not self._checked:
            self._drop_torn_tail()
        line = json.dumps(event, default=self._default) + "\n"
        with open(self.path, "a") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def events(self) -> list[dict]:
        try:
            lines = self.path.read_text(errors="replace").split("\n")
        except FileNotFoundError:
            return []
        events = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                if number == len(lines):  # no newline after it: torn
                    break
                raise UserError(f"{self.path}: line {number} is not valid JSON") from None
        return events

    def _drop_torn_tail(self) -> None:
        with open(self.path, "rb+") as handle:
            end = handle.seek(0, os.SEEK_END)
            position = end
            while position > 0:  # walk back to the last newline; the bytes after it are the torn line
                start = max(0, position - 65536)
                handle.seek(start)
                cut = handle.read(position - start).rfind(b"\n")
                if cut >= 0 or start == 0:
                    keep = start + cut + 1
                    break
                position = start
            else:
                keep = end
            if keep != end:
                handle.truncate(keep)
                handle.flush()
                os.fsync(handle.fileno())
        self._checked = True
