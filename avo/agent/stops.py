"""Why a run, or one model call, ends early. Small exceptions the loop turns into a final record."""

from __future__ import annotations


class StopRun(Exception):
    """Ends the loop; the message says why, in words a person reads in the transcript and the live view."""


class BudgetExhausted(StopRun):
    """Time, candidate or cost budget spent."""


class Interrupted(StopRun):
    """SIGINT (or a stop request) arrived; the run is left resumable."""


class ModelExhausted(StopRun):
    """The model has nothing more to do (a replayed transcript ran out, a search space was covered).

    Backends raise it from `next_turn`; the loop records it and finishes the run.
    """


class ContextOverflow(Exception):
    """The API refused the conversation as too long: the loop restarts it from a summary and asks again."""
