"""Scripted backend: canned turns, in order, for tests and for re-issuing a recorded run (replay.py).

Each entry of the script is a `Turn`; an exception instance, raised when its turn comes (an API error,
`ContextOverflow`, `KeyboardInterrupt`); or a callable `hook(system, messages, tools) -> Turn`, which may look at
what the model was sent, sleep, or raise. Supervisor turns (asked for with no tools) take the next entry of
`reviews`. When the script runs out the model has nothing more to do: `ModelExhausted`, which ends the run.
Every request is kept in `requests` (unless `keep_requests` is off), so a test can read what the loop sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Union

from avo.agent.models.base import Message, ToolCall, ToolSpec, Turn, Usage
from avo.agent.stops import ModelExhausted

Hook = Callable[[str, list[Message], list[ToolSpec]], Turn]
Entry = Union[Turn, BaseException, Hook]


def turn(*calls: tuple[str, dict[str, Any]], text: str = "", usage: tuple[int, int] = (0, 0),
         model: str = "") -> Turn:
    """A Turn calling `calls` ((tool name, arguments) pairs) in order, with ids unique within the turn."""
    tool_calls = [ToolCall(id=f"call-{i}", name=name, arguments=args) for i, (name, args) in enumerate(calls)]
    return Turn(text=text, tool_calls=tool_calls, usage=Usage(input_tokens=usage[0], output_tokens=usage[1]),
                stop_reason="tool_use" if calls else "end_turn", model=model)


class ScriptedModel:
    def __init__(self, script: Iterable[Entry], *, reviews: Iterable[Entry] = (), name: str = "scripted",
                 exhausted: str = "the scripted turns ran out", no_review: str = "(no scripted review)",
                 keep_requests: bool = True):
        self.name = name
        self.script, self.reviews = list(script), list(reviews)
        self.exhausted, self.no_review = exhausted, no_review
        self.keep_requests = keep_requests
        self.requests: list[tuple[str, list[Message], list[ToolSpec]]] = []

    def next_turn(self, system: str, messages: list[Message], tools: list[ToolSpec]) -> Turn:
        if self.keep_requests:
            self.requests.append((system, list(messages), list(tools)))
        if not tools:  # a supervisor turn
            if not self.reviews:
                return Turn(text=self.no_review, model=self.name)
            return self._play(self.reviews.pop(0), system, messages, tools)
        if not self.script:
            raise ModelExhausted(self.exhausted)
        return self._play(self.script.pop(0), system, messages, tools)

    @staticmethod
    def _play(entry: Entry, system: str, messages: list[Message], tools: list[ToolSpec]) -> Turn:
        if isinstance(entry, BaseException):
            raise entry
        if isinstance(entry, Turn):
            return entry
        return entry(system, messages, tools)
