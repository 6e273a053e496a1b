"""Backends through the real SDKs against loopback servers: conversions, caching, retries, error mapping."""

from __future__ import annotations

import random

import pytest

from agent_loopback import (Loopback, anthropic_error, anthropic_turn, openai_error, openai_turn, sequence)
from avo.agent.models.anthropic import AnthropicModel
from avo.agent.models.base import Message, ToolCall, ToolResult, ToolSpec
from avo.agent.models.openai_compat import OpenAICompatModel
from avo.agent.models.retry import RetryPolicy
from avo.agent.stops import ContextOverflow, Interrupted
from avo.errors import UserError

TOOLS = [ToolSpec(name="read_file", description="Read a file.",
                  input_schema={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
         ToolSpec(name="evaluate", description="Score it.",
                  input_schema={"type": "object", "properties": {"rationale": {"type": "string"}}})]
HISTORY = [
    Message(role="user", text="start"),
    Message(role="assistant", text="reading", tool_calls=[ToolCall(id="toolu_1", name="read_file",
                                                                   arguments={"path": "kernel.py"})]),
    Message(role="user", tool_results=[ToolResult(call_id="toolu_1", name="read_file", content="SPEED = 1")],
            text="Supervisor: try harder"),
]


def policy(waits: list) -> RetryPolicy:
    return RetryPolicy(sleep=lambda s: None, on_wait=lambda n, s, why: waits.append((n, round(s, 3), why)),
                       rng=random.Random(0))


def anthropic(server, waits) -> AnthropicModel:
    return AnthropicModel("claude-sonnet-5-5", base_url=server.url, api_key="sk-test", policy=policy(waits))


def test_anthropic_turn_round_trip_with_prompt_caching():
    with Loopback(sequence([anthropic_turn(("evaluate", {"rationale": "go"}), text="acting", usage=(321, 12))])) as s:
        turn = anthropic(s, []).next_turn("SYSTEM", HISTORY, TOOLS)
    assert turn.text == "acting" and turn.tool_calls[0].name == "evaluate"
    assert turn.tool_calls[0].arguments == {"rationale": "go"} and turn.usage.input_tokens == 321
    body = s.requests[0]["body"]
    headers = s.requests[0]["headers"]
    assert s.requests[0]["path"] == "/v1/messages"
    assert "sk-test" in headers.get("x-api-key", "") + headers.get("authorization", "")
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" in body["tools"][-1] and "cache_control" not in body["tools"][0]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"][1] == {"type": "tool_use", "id": "toolu_1", "name": "read_file",
                                                 "input": {"path": "kernel.py"}}
    last = body["messages"][2]["content"]
    assert last[0]["type"] == "tool_result" and last[0]["tool_use_id"] == "toolu_1"
    assert last[1]["text"] == "Supervisor: try harder" and last[1]["cache_control"] == {"type": "ephemeral"}


@pytest.mark.parametrize("error,reason", [
    (anthropic_error(429, "rate_limit_error", headers={"retry-after": "3"}), "rate limited (429)"),
    (anthropic_error(529, "overloaded_error"), "overloaded (529)"),
    (anthropic_error(500, "api_error"), "server error (500)"),
])
def test_anthropic_retries_then_succeeds(error, reason):
    waits = []
    with Loopback(sequence([error, error, anthropic_turn(("read_file", {"path": "kernel.py"}))])) as s:
        turn = anthropic(s, waits).next_turn("S", HISTORY[:1], TOOLS)
    assert turn.tool_calls[0].arguments == {"path": "kernel.py"} and len(s.requests) == 3
    assert [w[0] for w in waits] == [1, 2] and all(w[2] == reason for w in waits)
    if "429" in reason:
        assert all(w[1] >= 3 for w in waits)  # Retry-After honoured


def test_anthropic_long_outage_pauses_with_capped_backoff():
    waits, slept = [], []
    p = RetryPolicy(base_s=1, cap_s=20, sleep=slept.append, on_wait=lambda n, s, why: waits.append(s),
                    rng=random.Random(1))
    outage = [anthropic_error(503, "api_error")] * 12
    with Loopback(sequence([*outage, anthropic_turn(text="back")])) as s:
        model = AnthropicModel("claude-sonnet-5-5", base_url=s.url, api_key="k", policy=p)
        assert model.next_turn("S", HISTORY[:1], TOOLS).text == "back"
    assert len(waits) == 12 and max(waits) <= 20 and waits[-1] >= 10  # grew to the cap, never past it
    assert sum(slept) == pytest.approx(sum(waits))


def test_anthropic_errors_that_must_not_be_retried():
    with Loopback(sequence([anthropic_error(401, "authentication_error", "invalid x-api-key")])) as s:
        with pytest.raises(UserError, match="credentials"):
            anthropic(s, []).next_turn("S", HISTORY[:1], TOOLS)
    with Loopback(sequence([anthropic_error(400, "invalid_request_error", "prompt is too long: 210000 tokens")])) as s:
        with pytest.raises(ContextOverflow):
            anthropic(s, []).next_turn("S", HISTORY[:1], TOOLS)
    assert len(s.requests) == 1


def test_waiting_ends_on_a_stop_request():
    p = RetryPolicy(sleep=lambda s: None, should_stop=lambda: True)
    with Loopback(sequence([anthropic_error(529, "overloaded_error")])) as s:
        model = AnthropicModel("m", base_url=s.url, api_key="k", policy=p)
        with pytest.raises(Interrupted):
            model.next_turn("S", HISTORY[:1], TOOLS)


def test_openai_round_trip_and_malformed_arguments():
    with Loopback(sequence([openai_turn(("read_file", '{"path": "kernel.py"'), ("evaluate", {"rationale": "r"}),
                                        text="hm", usage=(500, 7))])) as s:
        model = OpenAICompatModel(base_url=s.url + "/v1", policy=policy([]))
        turn = model.next_turn("SYSTEM", HISTORY, TOOLS)
    assert model.name == "served-model"  # picked from /v1/models
    bad, good = turn.tool_calls
    assert bad.raw_arguments == '{"path": "kernel.py"' and bad.arguments == {}
    assert good.arguments == {"rationale": "r"} and turn.usage.input_tokens == 500 and turn.text == "hm"
    body = s.requests[0]["body"]
    assert s.requests[0]["path"] == "/v1/chat/completions"
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "user"]
    assert body["messages"][2]["tool_calls"][0]["function"]["arguments"] == '{"path": "kernel.py"}'
    assert body["tools"][0]["function"]["parameters"]["required"] == ["path"]


@pytest.mark.parametrize("status", [429, 502, 529])
def test_openai_retries_then_succeeds(status):
    waits = []
    with Loopback(sequence([openai_error(status), openai_turn(text="ok")])) as s:
        turn = OpenAICompatModel("m", base_url=s.url + "/v1", policy=policy(waits)).next_turn("S", HISTORY[:1], TOOLS)
    assert turn.text == "ok" and len(waits) == 1


def test_openai_context_overflow():
    with Loopback(sequence([openai_error(400, "This model's maximum context length is 8192 tokens")])) as s:
        with pytest.raises(ContextOverflow):
            OpenAICompatModel("m", base_url=s.url + "/v1", policy=policy([])).next_turn("S", HISTORY[:1], TOOLS)
