"""Money: USD from token usage and the price table (secrets are avo/util/secrets.py)."""

from __future__ import annotations

from avo.agent.models.base import Usage

CACHE_READ_FACTOR = 0.1
CACHE_WRITE_FACTOR = 1.25
"""Prompt-cache prices relative to the input price (Anthropic's published ratios)."""


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
