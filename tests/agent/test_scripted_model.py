"""The scripted model the loop tests run on: turns in order, hooks that see the request, raise or sleep, reviews
for supervisor turns, and an end that finishes the run."""

from __future__ import annotations

import pytest

from avo.agent.models.base import Message, ToolSpec
from avo.agent.models.scripted import ScriptedModel, turn
from avo.agent.stops import ContextOverflow, ModelExhausted

TOOLS = [ToolSpec(name="note", description="d", input_schema={})]
HELLO = [Message(role="user", text="hello")]


def test_turns_come_in_order_and_hooks_see_the_request():
    seen = []

    def hook(system, messages, tools):
        seen.append((system, messages[-1].text, [t.name for t in tools]))
        return turn(("note", {"text": "from the hook"}))

    model = ScriptedModel([turn(("note", {"text": "a"}), ("note", {"text": "b"})), hook])
    first = model.next_turn("S", HELLO, TOOLS)
    assert [c.arguments["text"] for c in first.tool_calls] == ["a", "b"]
    assert [c.id for c in first.tool_calls] == ["call-0", "call-1"] and first.stop_reason == "tool_use"
    assert model.next_turn("S", HELLO, TOOLS).tool_calls[0].arguments == {"text": "from the hook"}
    assert seen == [("S", "hello", ["note"])] and len(model.requests) == 2
    with pytest.raises(ModelExhausted, match="ran out"):
        model.next_turn("S", HELLO, TOOLS)


def test_an_exception_in_the_script_is_raised_when_its_turn_comes():
    model = ScriptedModel([ContextOverflow("too long"), turn(text="again")])
    with pytest.raises(ContextOverflow):
        model.next_turn("S", HELLO, TOOLS)
    assert model.next_turn("S", HELLO, TOOLS).text == "again"


def test_supervisor_turns_take_the_reviews():
    model = ScriptedModel([turn(text="work")], reviews=[turn(text="try bigger tiles")])
    assert model.next_turn("S", HELLO, []).text == "try bigger tiles"  # no tools: a supervisor turn
    assert model.next_turn("S", HELLO, []).text == "(no scripted review)"
    assert model.next_turn("S", HELLO, TOOLS).text == "work"
