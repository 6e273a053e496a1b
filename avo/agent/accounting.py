"""Money and secrets: USD from token usage, and scrubbing of secret values before anything is written."""

from __future__ import annotations

import os
import re
from typing import Any

from avo.agent.models.base import Usage

CACHE_READ_FACTOR = 0.1
CACHE_WRITE_FACTOR = 1.25
"""Prompt-cache prices relative to the input price (Anthropic's published ratios)."""

SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH)", re.IGNORECASE)
SECRET_PATTERN = re.compile(r"\b(sk-[A-Za-z0-9_\-]{16,}|sk-ant-[A-Za-z0-9_\-]{16,})")


def price_for(model: str, prices: dict[str, tuple[float, float]]) -> tuple[float, float] | None:
    """(input, output) USD per million tokens by the longest matching model-name prefix; None when unknown."""
    name = model.split(":")[-1]
    matches = [p for p in prices if name.startswith(p)]
    return prices[max(matches, key=len)] if matches else None


def cost_usd(model: str, usage: Usage, prices: dict[str, tuple[float, float]]) -> float | None:
    price = price_for(model, prices)
    if price is None:
        return None
    per_in, per_out = price
    tokens_in = usage.input_tokens + usage.cache_read_tokens * CACHE_READ_FACTOR \
        + usage.cache_write_tokens * CACHE_WRITE_FACTOR
    return (tokens_in * per_in + usage.output_tokens * per_out) / 1e6


def secret_values(environ: dict[str, str] | None = None) -> list[str]:
    """Values of environment variables whose names say they are secrets (long enough not to be a flag)."""
    env = os.environ if environ is None else environ
    return sorted({v for k, v in env.items() if SECRET_NAME.search(k) and len(v) >= 8}, key=len, reverse=True)


def redact(value: Any, secrets: list[str]) -> Any:
    """`value` with every secret string (and anything shaped like an API key) replaced, recursively."""
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, "[redacted]")
        return SECRET_PATTERN.sub("[redacted]", value)
    if isinstance(value, dict):
        return {k: redact(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, secrets) for v in value]
    return value
