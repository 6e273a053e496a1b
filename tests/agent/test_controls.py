"""The controls a model's retry policy shares with the loop: built before the loop, connected when it starts."""

from __future__ import annotations

import pytest

from avo.agent.controls import Controls
from avo.agent.stops import BudgetExhausted, Interrupted


class Flaky(Exception):
    pass


def always_failing():
    raise Flaky("503")


def retryable(exc):
    return ("overloaded (529)", None)


def test_waits_are_recorded_and_end_with_the_budget_once_the_loop_is_connected():
    controls = Controls()
    policy = controls.retry_policy(sleep=lambda s: None)
    policy.reached = True  # the server answered before: a failure now is an outage, retried
    recorded, checks = [], []

    def check():
        checks.append(1)
        if len(checks) > 3:
            raise BudgetExhausted("time budget of 1 h spent")

    controls.record = lambda kind, **data: recorded.append((kind, data))
    controls.check_budget = check
    with pytest.raises(BudgetExhausted):
        policy.call(always_failing, retryable)
    assert recorded and recorded[0][0] == "api_wait" and recorded[0][1]["reason"] == "overloaded (529)"


def test_a_stop_request_ends_a_wait():
    controls = Controls()
    policy = controls.retry_policy(sleep=lambda s: None)
    policy.reached = True
    controls.stop_requested = True
    with pytest.raises(Interrupted):
        policy.call(always_failing, retryable)
