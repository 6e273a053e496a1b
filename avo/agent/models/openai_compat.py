"""OpenAI-compatible backend (vLLM, SGLang, Ollama, OpenAI): chat.completions with function tools.

Same retry policy as the Anthropic backend. Arguments that are not valid JSON are passed on as `raw_arguments`, so
the loop can tell the model instead of crashing.
"""

from __future__ import annotations

import json
import os
from typing import Any

import openai

from avo.agent.models.base import Message, ToolCall, ToolSpec, Turn, Usage
from avo.agent.models.retry import RetryPolicy, retry_after_seconds
from avo.agent.stops import ContextOverflow
from avo.errors import UserError


class OpenAICompatModel:
    def __init__(self, model: str | None = None, *, base_url: str | None = None, max_tokens: int = 8192,
                 api_key: str | None = None, policy: RetryPolicy | None = None, timeout_s: float = 600.0):
        self.max_tokens = max_tokens
        self.policy = policy or RetryPolicy()
        # Local servers accept any key; OpenAI itself needs OPENAI_API_KEY.
        key = api_key or os.environ.get("OPENAI_API_KEY") or "unused"
        try:
            self.client = openai.OpenAI(api_key=key, base_url=base_url, max_retries=0, timeout=timeout_s)
        except openai.OpenAIError as exc:
            raise UserError(f"cannot set up the OpenAI-compatible client: {exc}") from None
        self.policy.endpoint = str(self.client.base_url).rstrip("/")
        self.name = model or self._served_model()

    def _served_model(self) -> str:
        """The first model the server lists, for servers that host one (vLLM, SGLang)."""
        models = self.policy.call(lambda: list(self.client.models.list()), classify)
        if not models:
            raise UserError("the server lists no models: name one with --model")
        return models[0].id

    def next_turn(self, system: str, messages: list[Message], tools: list[ToolSpec]) -> Turn:
        request: dict[str, Any] = {
            "model": self.name,
            "max_tokens": self.max_tokens,
            "messages": [{"role": "system", "content": system}, *to_openai(messages)],
        }
        if tools:
            request["tools"] = [{"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.input_schema}} for t in tools]
        return from_openai(self.policy.call(lambda: self._create(request), classify))

    def _create(self, request: dict[str, Any]):
        try:
            return self.client.chat.completions.create(**request)
        except openai.BadRequestError as exc:
            text = str(exc).lower()
            if "context_length" in text or "maximum context" in text or "too long" in text:
                raise ContextOverflow(str(exc)) from None
            raise
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise UserError(f"the server refused the credentials ({exc.status_code}): check OPENAI_API_KEY") from None
        except openai.NotFoundError:
            raise UserError(f"the server does not serve model '{self.name}' (or --base-url is wrong)") from None


def classify(exc: Exception) -> tuple[str, float | None] | None:
    if isinstance(exc, openai.APITimeoutError):
        return "timeout", None
    if isinstance(exc, openai.APIConnectionError):
        return "connection failed", None
    if isinstance(exc, openai.APIStatusError):
        code = exc.status_code
        if code in (408, 409, 429) or code >= 500:
            label = {429: "rate limited (429)", 529: "overloaded (529)"}.get(code, f"server error ({code})")
            return label, retry_after_seconds(exc.response.headers)
    return None


def to_openai(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
            if message.tool_calls:
                entry["tool_calls"] = [{"id": c.id, "type": "function", "function": {
                    "name": c.name,
                    "arguments": c.raw_arguments if c.raw_arguments is not None else json.dumps(c.arguments),
                }} for c in message.tool_calls]
            out.append(entry)
            continue
        for result in message.tool_results:
            out.append({"role": "tool", "tool_call_id": result.call_id, "content": result.content or "(no output)"})
        if message.text or not message.tool_results:
            out.append({"role": "user", "content": message.text or "(continue)"})
    return out


def from_openai(response: Any) -> Turn:
    if not response.choices:
        return Turn(model=getattr(response, "model", "") or "")
    choice = response.choices[0]
    calls: list[ToolCall] = []
    for call in choice.message.tool_calls or []:
        raw = call.function.arguments or "{}"
        try:
            arguments = json.loads(raw)
            if not isinstance(arguments, dict):
                raise ValueError("not an object")
            calls.append(ToolCall(id=call.id, name=call.function.name, arguments=arguments))
        except ValueError:
            calls.append(ToolCall(id=call.id, name=call.function.name, raw_arguments=raw))
    usage = Usage()
    if response.usage is not None:
        details = getattr(response.usage, "prompt_tokens_details", None)
        cached = (getattr(details, "cached_tokens", None) or 0) if details is not None else 0
        usage = Usage(input_tokens=(response.usage.prompt_tokens or 0) - cached,
                      output_tokens=response.usage.completion_tokens or 0, cache_read_tokens=cached)
    return Turn(text=choice.message.content or "", tool_calls=calls, usage=usage,
                stop_reason=choice.finish_reason, model=response.model or "")
