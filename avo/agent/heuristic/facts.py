"""Profile and compiler facts, read from the `data` dicts of the profile and inspect_compile tools.

The profile summary is a nested dict whose exact layout belongs to the profiler; this reader looks for the few
numbers the rule model uses by what they are called (stall reasons, tensor-pipe and DRAM utilisation, occupancy,
registers, spills), so a renamed or missing field only means that fact is not used.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from avo.agent.heuristic.rules import Facts


def _walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, f"{path}.{key}".lower() if path else str(key).lower())
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, f"{path}[{i}]")
    else:
        yield path, value


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        match = re.fullmatch(r"\s*([-+]?[\d,]*\.?\d+)\s*%?\s*", value)
        if match:
            return float(match.group(1).replace(",", ""))
    return None


def _first(flat: list[tuple[str, Any]], *patterns: str) -> float | None:
    for pattern in patterns:
        for path, value in flat:
            if re.search(pattern, path):
                number = _number(value)
                if number is not None:
                    return number
    return None


def _largest(flat: list[tuple[str, Any]], pattern: str) -> float | None:
    values = [n for path, value in flat if re.search(pattern, path) and (n := _number(value)) is not None]
    return max(values) if values else None


def _long_scoreboard(data: Any) -> float | None:
    """Share of stall cycles spent waiting on global/local memory (ncu's long scoreboard)."""
    found: list[float] = []

    def visit(value: Any) -> None:
        if isinstance(value, dict):
            reason = str(value.get("reason", value.get("name", ""))).lower().replace(" ", "_")
            pct = _number(value.get("pct", value.get("percent", value.get("share"))))
            # ncu names it long_scoreboard in metrics, and in words in its CPIStall rule
            if ("long_scoreboard" in reason or ("scoreboard" in reason and "l1tex" in reason)) and pct is not None:
                found.append(pct)
            for key, item in value.items():
                if "long_scoreboard" in str(key).lower() and _number(item) is not None:
                    found.append(_number(item))
                else:
                    visit(item)
        elif isinstance(value, list):
            for item in value:
                visit(item)

    visit(data)
    return max(found) if found else None


def facts_from(profile: dict | None = None, compile_info: dict | None = None) -> Facts:
    facts = Facts()
    if profile:
        flat = list(_walk(profile))
        facts.long_scoreboard_pct = _long_scoreboard(profile)
        facts.tensor_pipe_pct = _first(flat, r"tensor.*(pct|util|active|%)", r"tensor")
        facts.dram_pct = _first(flat, r"dram.*(pct|%|throughput|sol)", r"memory.*(sol|pct|throughput)")
        facts.compute_pct = _first(flat, r"(compute|sm)_?(sol|throughput).*", r"compute.*pct")
        facts.occupancy_pct = _first(flat, r"achieved.*occupancy", r"occupancy")
        facts.registers = _int(_first(flat, r"registers?_per_thread", r"registers"))
        facts.spills = _int(_largest(flat, r"spill"))
        facts.sources.append("profile")
    if compile_info:
        flat = list(_walk(compile_info))
        registers = _int(_first(flat, r"registers"))
        spills = _int(_largest(flat, r"spill"))
        facts.registers = registers if registers is not None else facts.registers
        facts.spills = spills if spills is not None else facts.spills
        facts.sources.append("compile")
    return facts


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)
