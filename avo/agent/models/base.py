"""The Model boundary: one turn of a conversation with tools, in a backend-neutral shape.

Every backend (anthropic, openai, heuristic, replay) takes the same messages and tool specs and returns a `Turn`.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None
    """The arguments as the model sent them, when they were not valid JSON (the loop answers with an error)."""


class ToolResult(BaseModel):
    call_id: str
    name: str
    content: str
    """What the model reads."""
    is_error: bool = False
    data: dict[str, Any] | None = None
    """Structured form of the result, for agents that do not read prose (the heuristic agent) and for the transcript."""


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class Turn(BaseModel):
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    stop_reason: str | None = None
    model: str = ""


class Message(BaseModel):
    role: Literal["user", "assistant"]
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Assistant messages: the calls the model made."""
    tool_results: list[ToolResult] = Field(default_factory=list)
    """User messages: results of the previous assistant message's calls."""


class ToolSpec(BaseModel):
    name: str
    description: str
    input_schema: dict[str, Any]


class Model(Protocol):
    name: str

    def next_turn(self, system: str, messages: list[Message], tools: list[ToolSpec]) -> Turn: ...
