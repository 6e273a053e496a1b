"""Retry policy shared by the network backends: exponential backoff with jitter, capped, never giving up.

A week-long run must survive an API outage of any length, so retryable failures (429, 5xx, overloaded, timeouts,
dropped connections) pause the run rather than end it. The sleep, the clock of the jitter and the callbacks are
injectable so tests run in milliseconds and the live view can show the pause.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Callable, TypeVar

from avo.agent.stops import Interrupted

T = TypeVar("T")


@dataclass
class RetryPolicy:
    base_s: float = 2.0
    cap_s: float = 300.0
    """Longest single wait: an outage of hours is retried every few minutes, not every few days."""
    sleep: Callable[[float], None] = time.sleep
    on_wait: Callable[[int, float, str], None] | None = None
    """Called before each wait with (attempt, delay_s, reason); the loop records it and the live view shows it."""
    on_recovered: Callable[[int], None] | None = None
    """Called with the number of failed attempts once a call succeeds after failures."""
    should_stop: Callable[[], bool] | None = None
    """Polled during waits; when true the wait ends with `Interrupted` (Ctrl-C during an outage)."""
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Exponential in the attempt, capped, with jitter in [50%, 100%] so clients do not retry in lockstep."""
        ceiling = min(self.cap_s, self.base_s * 2 ** min(attempt - 1, 30))
        wait = ceiling * (0.5 + 0.5 * self.rng.random())
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.cap_s))
        return wait

    def call(self, fn: Callable[[], T], classify: Callable[[Exception], tuple[str, float | None] | None]) -> T:
        """`fn()` until it succeeds. `classify(exc)` gives (reason, retry_after_s) for retryable errors, else None."""
        attempt = 0
        while True:
            try:
                result = fn()
            except Exception as exc:
                verdict = classify(exc)
                if verdict is None:
                    raise
                attempt += 1
                reason, retry_after = verdict
                wait = self.delay(attempt, retry_after)
                if self.on_wait is not None:
                    self.on_wait(attempt, wait, reason)
                self._wait(wait)
                continue
            if attempt and self.on_recovered is not None:
                self.on_recovered(attempt)
            return result

    def _wait(self, seconds: float) -> None:
        # Sleep in slices so Ctrl-C during a long outage ends the run promptly and cleanly.
        remaining = seconds
        while remaining > 0:
            if self.should_stop is not None and self.should_stop():
                raise Interrupted("interrupted while waiting for the model API")
            chunk = min(remaining, 1.0)
            self.sleep(chunk)
            remaining -= chunk


def retry_after_seconds(headers) -> float | None:
    """The Retry-After header as seconds, when the server sent a number."""
    try:
        value = headers.get("retry-after") if headers is not None else None
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
