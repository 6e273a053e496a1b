"""The model API failing under a run: an outage ends with the budget, a server never reached is a setup error in one
line, a connection lost mid-run and a timeout are retried. Real SDKs against loopback servers (or a closed port)."""

from __future__ import annotations

import random
import socket
import threading
import time

import pytest

from agent_fakes import evolve, fake_session
from agent_loopback import Loopback, anthropic_error, anthropic_turn, openai_turn, sequence
from avo.agent.models.anthropic import AnthropicModel
from avo.agent.models.base import Message
from avo.agent.models.openai_compat import OpenAICompatModel
from avo.agent.models.retry import RetryPolicy
from avo.agent.stops import BudgetExhausted
from avo.cli import main
from avo.errors import UserError
from avo.run.directory import Run

START = [Message(role="user", text="start")]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_outage_ends_with_the_time_budget(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-key-000000")
    outcome = []

    def outage(index, body):  # never over: only the budget can end the run
        return anthropic_error(503, "api_error")

    with Loopback(outage) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        session = fake_session(tmp_path, flags={"agent.kind": "anthropic", "budget.hours": 0.0005})[0]  # 1.8 s
        driver = threading.Thread(target=lambda: outcome.append(evolve(session)), daemon=True)
        driver.start()
        driver.join(timeout=300)  # a hang guard: a run that ignored its budget would wait out the outage forever
    assert outcome, "the run was still waiting for the API long after its budget"
    events = outcome[0].run.events()
    assert outcome[0].code == 0 and "time budget" in events[-1]["reason"]
    assert any(e["kind"] == "api_wait" for e in events) and not any(e["kind"] == "model_turn" for e in events)


def test_a_server_never_reached_is_one_line_exit_2(tmp_path, capsys):
    url = f"http://127.0.0.1:{closed_port()}/v1"  # without --model the server is asked for its model before any run
    code = main(["evolve", "--kernel", "gemm", "--device", "interpret", "--runs-dir", str(tmp_path / "runs"),
                 "--quiet", "--agent", "openai", "--base-url", url, "--hours", "1"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("avo: error: cannot connect to http://127.0.0.1:") and "refused" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "runs").exists()
    # with --model, at the first turn, after the baseline
    session, _, _ = fake_session(tmp_path, flags={"agent.kind": "openai", "agent.base_url": url, "agent.model": "m"})
    with pytest.raises(UserError) as refused:
        evolve(session)
    message = str(refused.value)
    assert message.startswith("cannot connect to http://127.0.0.1:") and "refused" in message
    assert "\n" not in message
    assert not any(e["kind"] == "api_wait" for e in Run.open("latest", tmp_path / "runs").events())  # not retried


def test_a_connection_lost_after_the_server_answered_is_an_outage_retried():
    waits = []

    def give_up():
        if len(waits) >= 2:
            raise BudgetExhausted("time budget of 1 h spent")

    policy = RetryPolicy(sleep=lambda s: None, on_wait=lambda n, s, why: waits.append(why), check=give_up,
                         rng=random.Random(0))
    with Loopback(sequence([openai_turn(text="first")])) as server:
        model = OpenAICompatModel("m", base_url=server.url + "/v1", policy=policy)
        assert model.next_turn("S", START, []).text == "first"
    with pytest.raises(BudgetExhausted):  # the server is gone now: refused, but it answered before
        model.next_turn("S", START, [])
    assert waits == ["connection failed", "connection failed"]


def test_an_api_timeout_is_retried():
    waits = []

    def slow_first(index, body):
        if index == 0:
            time.sleep(1.0)
        return anthropic_turn(text="in time")

    policy = RetryPolicy(sleep=lambda s: None, on_wait=lambda n, s, why: waits.append(why), rng=random.Random(0))
    with Loopback(slow_first) as server:
        model = AnthropicModel("claude-sonnet-5-5", base_url=server.url, api_key="k", policy=policy, timeout_s=0.3)
        assert model.next_turn("S", START, []).text == "in time"
    assert waits == ["timeout"]
