"""Anthropic Messages API backend: tool use, prompt caching, and retries that outlast an outage.

The SDK's own retries are switched off: `RetryPolicy` retries forever on 429, 5xx, 529 (overloaded), timeouts and
dropped connections, with capped backoff the loop can show. `ANTHROPIC_BASE_URL` is honoured by the SDK itself.
"""

from __future__ import annotations

import os
from typing import Any

import anthropic

from avo.agent.models.base import Message, ToolCall, ToolSpec, Turn, Usage
from avo.agent.models.retry import RetryPolicy, retry_after_seconds
from avo.agent.stops import ContextOverflow
from avo.errors import UserError

DEFAULT_MODEL = "claude-sonnet-5-5"
CACHE = {"type": "ephemeral"}


class AnthropicModel:
    def __init__(self, model: str | None = None, *, max_tokens: int = 8192, base_url: str | None = None,
                 api_key: str | None = None, policy: RetryPolicy | None = None, timeout_s: float = 600.0):
        self.name = model or DEFAULT_MODEL
        self.max_tokens = max_tokens
        self.policy = policy or RetryPolicy()
        if not (api_key or os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
            raise UserError("the anthropic agent needs ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) in the environment")
        try:
            self.client = anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout_s)
        except anthropic.AnthropicError as exc:
            raise UserError(f"cannot set up the Anthropic client: {exc}") from None
        self.policy.endpoint = str(self.client.base_url).rstrip("/")

    def next_turn(self, system: str, messages: list[Message], tools: list[ToolSpec]) -> Turn:
        request: dict[str, Any] = {
            "model": self.name,
            "max_tokens": self.max_tokens,
            "system": [{"type": "text", "text": system, "cache_control": CACHE}],
            "messages": to_anthropic(messages),
        }
        if tools:
            specs = [t.model_dump() for t in tools]
            specs[-1]["cache_control"] = CACHE  # caches every tool definition (a prefix) with one breakpoint
            request["tools"] = specs
        response = self.policy.call(lambda: self._create(request), classify)
        return from_anthropic(response)

    def _create(self, request: dict[str, Any]):
        try:
            return self.client.messages.create(**request)
        except anthropic.BadRequestError as exc:
            if "too long" in str(exc).lower() or "too many tokens" in str(exc).lower():
                raise ContextOverflow(str(exc)) from None
            raise
        except (anthropic.AuthenticationError, anthropic.PermissionDeniedError) as exc:
            raise UserError(f"the Anthropic API refused the credentials ({exc.status_code}): "
                            "check ANTHROPIC_API_KEY") from None
        except anthropic.NotFoundError:
            raise UserError(f"the Anthropic API does not know model '{self.name}': pick another with --model") from None


def classify(exc: Exception) -> tuple[str, float | None] | None:
    """(reason, retry-after) for failures worth waiting out; None for the rest."""
    if isinstance(exc, anthropic.APITimeoutError):
        return "timeout", None
    if isinstance(exc, anthropic.APIConnectionError):
        return "connection failed", None
    if isinstance(exc, anthropic.APIStatusError):
        code = exc.status_code
        if code == 429 or code == 408 or code == 409 or code >= 500:
            label = {429: "rate limited (429)", 529: "overloaded (529)"}.get(code, f"server error ({code})")
            return label, retry_after_seconds(exc.response.headers)
    return None


def to_anthropic(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        blocks: list[dict[str, Any]] = []
        if message.role == "assistant":
            if message.text:
                blocks.append({"type": "text", "text": message.text})
            for call in message.tool_calls:
                blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments})
        else:
            for result in message.tool_results:
                blocks.append({"type": "tool_result", "tool_use_id": result.call_id,
                               "content": result.content or "(no output)", "is_error": result.is_error})
            if message.text:
                blocks.append({"type": "text", "text": message.text})
        if not blocks:
            blocks.append({"type": "text", "text": "(continue)"})
        out.append({"role": message.role, "content": blocks})
    if out:
        # A breakpoint on the newest block caches the whole conversation so far for the next turn.
        out[-1]["content"][-1] = {**out[-1]["content"][-1], "cache_control": CACHE}
    return out


def from_anthropic(response: Any) -> Turn:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in response.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            calls.append(ToolCall(id=block.id, name=block.name,
                                  arguments=block.input if isinstance(block.input, dict) else {}))
    u = response.usage
    usage = Usage(
        input_tokens=u.input_tokens or 0,
        output_tokens=u.output_tokens or 0,
        cache_read_tokens=getattr(u, "cache_read_input_tokens", None) or 0,
        cache_write_tokens=getattr(u, "cache_creation_input_tokens", None) or 0,
    )
    return Turn(text="\n".join(texts), tool_calls=calls, usage=usage, stop_reason=response.stop_reason,
                model=response.model)
