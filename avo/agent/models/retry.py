"""Retry policy shared by the network backends: exponential backoff with jitter, capped, giving up only when the
run's own budget ends.

A week-long run must survive an API outage of any length, so retryable failures (429, 5xx, overloaded, timeouts,
dropped connections) pause the run rather than end it; but no outage outlives the budget (`check` is polled during
waits), and a server that could not be reached from the very first call is a setup error (a wrong --base-url, a
server not started), said in one line. The sleep, the clock of the jitter and the callbacks are injectable so tests
run in milliseconds and the live view can show the pause.
"""

from __future__ import annotations

import random
import socket
import time
from dataclasses import dataclass, field
from typing import Callable, TypeVar

from avo.agent.stops import Interrupted
from avo.errors import UserError

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
    check: Callable[[], None] | None = None
    """Polled during waits; raises to end the wait (the loop's budget check: an outage ends with the budget)."""
    endpoint: str = "the API"
    """Where the backend connects, named when it cannot connect at all."""
    reached: bool = False
    """True once the server answered anything: from then on a refused connection is an outage, retried."""
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
                refused = cannot_connect(exc)
                if refused and not self.reached:
                    raise UserError(f"cannot connect to {self.endpoint} ({refused}): start the server, or check "
                                    "the network and --base-url") from None
                self.reached = self.reached or getattr(exc, "status_code", None) is not None
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
            self.reached = True
            if attempt and self.on_recovered is not None:
                self.on_recovered(attempt)
            return result

    def _wait(self, seconds: float) -> None:
        # Sleep in slices so Ctrl-C during a long outage ends the run promptly and cleanly.
        remaining = seconds
        while remaining > 0:
            if self.should_stop is not None and self.should_stop():
                raise Interrupted("interrupted while waiting for the model API")
            if self.check is not None:
                self.check()
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


def cannot_connect(exc: BaseException) -> str | None:
    """Why no connection could be made (refused, no such host), from the error's chain; None for anything else
    (timeouts, a dropped connection, an HTTP error status). The SDKs' HTTP stacks differ by version (httpx,
    httpx2, httpcore), so their ConnectError is known by name."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, socket.gaierror):
            return f"no such host: {seen.strerror or seen}"
        if any(cls.__name__ == "ConnectError" for cls in type(seen).__mro__):
            text = str(seen)
            if "refused" in text.lower():
                return "connection refused"
            if not (seen.__cause__ or seen.__context__):
                return text[:120] or "connection failed"
        seen = seen.__cause__ or seen.__context__
    return None
