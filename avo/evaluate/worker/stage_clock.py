"""Seconds spent in stages and their parts, as `<stage>` and `<stage>.<part>` entries of an EvalResult's stage_s."""

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


class stage:
    """Adds the seconds spent inside to `stage_s[name]`."""

    def __init__(self, stage_s: dict[str, float], name: str):
        self.stage_s, self.name = stage_s, name

    def __enter__(self):
        self.start = time.perf_counter()

    def __exit__(self, *exc):
        spent = time.perf_counter() - self.start
        self.stage_s[self.name] = round(self.stage_s.get(self.name, 0.0) + spent, 3)
        return False
