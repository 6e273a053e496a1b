"""Numbers as tables and log lines show them: one place for the format and for what a missing value reads as."""

from __future__ import annotations

import math


def number(value: float | int | None, spec: str = ".4g", none: str = "-") -> str:
    """`value` formatted by `spec` (a format-spec such as ".3f" or "9.4f"); `none` when there is no value."""
    return none if value is None else format(value, spec)


def finite(value: float | int | None, spec: str = ".4g", none: str = "-") -> str:
    """As `number`, with NaN read as no value and an infinity as `inf` (table cells of measured ratios)."""
    if isinstance(value, float) and math.isnan(value):
        return none
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return number(value, spec, none)


def first_line(exc: BaseException) -> str:
    """An error in one line: `Type: message`, the message reduced to its `headline` (the type alone for an empty
    message)."""
    text = headline(str(exc))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def headline(text: str) -> str:
    """The line of a message that says what failed: its first, unless that only introduces what follows (ends with
    a colon: "Traceback (most recent call last):", Triton's "at 12:4:", "case 1x1x1 raised:"), then its last, where
    a traceback or a compiler puts the error. '' for a blank message."""
    lines = [line.strip() for line in str(text).splitlines() if any(ch.isalnum() for ch in line)]  # not a caret
    if not lines:
        return ""
    return lines[-1] if lines[0].endswith(":") else lines[0]


def clock(seconds: float | None) -> str:
    """Elapsed seconds as h:mm:ss; '-' when unknown."""
    if seconds is None:
        return "-"
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def one_line(text: str, limit: int) -> str:
    """`text` on one line (whitespace runs made single spaces), cut to `limit` characters with '...'."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
