"""`make_model`: the backend `--agent` names; `auto` is anthropic with ANTHROPIC_API_KEY, else the heuristic."""

from __future__ import annotations

import os

from avo.agent.models.base import Model
from avo.agent.models.retry import RetryPolicy
from avo.config import AgentConfig
from avo.errors import UserError


def resolve_kind(config: AgentConfig) -> tuple[str, str]:
    """(kind, one line saying why) — `auto` resolved."""
    if config.kind != "auto":
        return config.kind, f"agent: {config.kind}"
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic", "agent: anthropic (ANTHROPIC_API_KEY is set)"
    return "heuristic", "agent: heuristic (offline; no ANTHROPIC_API_KEY set)"


def make_model(config: AgentConfig, *, seed: int = 0, policy: RetryPolicy | None = None,
               say=print) -> Model:
    """The Model for `config`, saying which in one line through `say`."""
    kind, why = resolve_kind(config)
    if kind == "anthropic":
        from avo.agent.models.anthropic import AnthropicModel

        model: Model = AnthropicModel(config.model, max_tokens=config.max_tokens, base_url=config.base_url,
                                      policy=policy)
    elif kind == "openai":
        if not config.base_url and not os.environ.get("OPENAI_BASE_URL") and not os.environ.get("OPENAI_API_KEY"):
            raise UserError("--agent openai needs --base-url (a vLLM, SGLang or Ollama server) or OPENAI_API_KEY")
        from avo.agent.models.openai_compat import OpenAICompatModel

        model = OpenAICompatModel(config.model, base_url=config.base_url, max_tokens=config.max_tokens,
                                  policy=policy)
    elif kind == "replay":
        if not config.replay_from:
            raise UserError("--agent replay needs --replay-from RUN_OR_TRANSCRIPT")
        from avo.agent.models.replay import ReplayModel

        model = ReplayModel(config.replay_from)
    elif kind == "heuristic":
        try:
            from avo.agent.models.heuristic import HeuristicModel
        except ImportError as exc:
            raise UserError(f"the heuristic agent is not available in this installation ({exc})") from None
        model = HeuristicModel(seed=seed)
    else:  # pragma: no cover - AgentConfig validates the kind
        raise UserError(f"unknown agent '{kind}'")
    say(f"{why}, model {model.name}")
    return model
