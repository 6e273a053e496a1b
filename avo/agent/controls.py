"""What the loop shares with a model's retry policy, made before either exists.

A network backend's RetryPolicy is built before the model, and the model before the loop, yet its waits must stop
on Ctrl-C, end with the run's budget and show in the transcript. `Controls` is made first and handed to both: the
policy gets its callbacks from it when it is built (`retry_policy`), and the loop, when it starts, connects its
budget check and event record and sets `stop_requested` on Ctrl-C.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from avo.agent.models.retry import RetryPolicy


def _nothing() -> None:
    return None


def _ignore(kind: str, **data: Any) -> None:
    return None


@dataclass
class Controls:
    stop_requested: bool = False
    """Set on Ctrl-C: the loop stops after the step, a policy's wait ends at once."""
    check_budget: Callable[[], None] = field(default=_nothing)
    """The loop's budget check (raises to end the run): an outage ends with the time budget, not after it."""
    record: Callable[..., None] = field(default=_ignore)
    """The loop's event record (transcript and live view)."""

    def retry_policy(self, **settings: Any) -> RetryPolicy:
        """A RetryPolicy whose waits are recorded, stop on Ctrl-C and end with the budget."""
        return RetryPolicy(on_wait=self.api_wait, on_recovered=self.api_resumed, should_stop=self.stopping,
                           check=self.check, **settings)

    def stopping(self) -> bool:
        return self.stop_requested

    def check(self) -> None:
        self.check_budget()

    def api_wait(self, attempt: int, delay_s: float, reason: str) -> None:
        self.record("api_wait", attempt=attempt, delay_s=round(delay_s, 1), reason=reason)

    def api_resumed(self, failed_attempts: int) -> None:
        self.record("api_resumed", failed_attempts=failed_attempts)
