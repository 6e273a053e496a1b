"""Seconds spent in the parts of a stage, as `<stage>.<part>` entries of an EvalResult's stage_s."""

from __future__ import annotations

import time


class Parts:
    def __init__(self, stage: str):
        self.stage = stage
        self.seconds: dict[str, float] = {}
        self._part, self._since = None, 0.0

    def start(self, part: str | None) -> None:
        """Ends the part running (if any) and starts `part` (None: none)."""
        now = time.perf_counter()
        if self._part is not None:
            key = f"{self.stage}.{self._part}"
            self.seconds[key] = round(self.seconds.get(key, 0.0) + now - self._since, 3)
        self._part, self._since = part, now

    def stop(self) -> None:
        self.start(None)
