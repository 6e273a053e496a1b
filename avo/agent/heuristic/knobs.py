"""Tunable knobs marked in a kernel's source: `NAME = value  # avo: tune v1 v2 v3`.

A marker may sit on a plain assignment, an annotated one (`BLOCK_M: tl.constexpr = 64`), a keyword default
(`num_warps=4,`) or a dict entry (`"BLOCK_M": 64,`). One knob per line; the comment lists the values to try, written
as Python literals (bare words are read as strings). Editing a knob rewrites only the value on its line, so every
other byte of the file stays as the author wrote it.

A per-shape table holds one entry per shape bucket; each of its knobs names its bucket in the marker
(`bucket=NAME`, anywhere among the values) and is called `NAME@BUCKET`, so one table reads as a kernel engineer
writes it by hand:

    CONFIGS = {
        "small": dict(
            BLOCK_M=32,  # avo: tune 16 32 64 128 bucket=small
            num_warps=4,  # avo: tune 2 4 8 bucket=small
        ),
        "large": dict(
            BLOCK_M=128,  # avo: tune 16 32 64 128 bucket=large
            num_warps=8,  # avo: tune 2 4 8 bucket=large
        ),
    }

The kernel's `bucket(...)` rule says which case takes which entry (avo/agent/buckets.py); a knob without a bucket
serves every case. The heuristic agent tunes each bucket's knobs from that bucket's own cases.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass

Value = int | float | bool | str
Point = dict[str, Value]
"""One setting of every knob, by name."""

_MARKER = re.compile(r"#\s*avo:\s*tune\b(?P<choices>.*)$")
# `name [: annotation] = value` or `"name": value`, then an optional comma before the marker.
_ASSIGN = re.compile(
    r"^(?P<head>\s*(?:.*?[\s(,{])?)"
    r"(?P<key>(?P<q>[\"']?)(?P<name>[A-Za-z_]\w*)(?P=q))"
    r"(?P<sep>\s*(?::\s*[^=#,]+?\s*)?=\s*|\s*:\s*)"
    r"(?P<value>\"[^\"]*\"|'[^']*'|[-+]?[\w.]+)"
    r"(?P<tail>[\s,)}\]]*:?\s*)$"
)


@dataclass(frozen=True)
class Knob:
    name: str
    value: Value
    choices: tuple[Value, ...]
    line: int
    """0-based line number in kernel.py."""
    quote: str = ""
    """Quote character of a string value as written ('' for non-strings)."""
    bucket: str | None = None
    """The shape bucket whose table entry the knob is (`bucket=NAME` in the marker); None: every case's."""

    @property
    def base(self) -> str:
        """The name as written in the source: `BLOCK_M` for `BLOCK_M@small` and `BLOCK_M#2`."""
        return base_name(self.name)

    def neighbours(self, value: Value | None = None) -> list[Value]:
        """Values one step away in the choice list (every other value for strings and flags)."""
        value = self.value if value is None else value
        if isinstance(value, bool) or isinstance(value, str):
            return [c for c in self.choices if c != value]
        ordered = self.choices
        if value not in ordered:
            return list(ordered)
        i = ordered.index(value)
        return [ordered[j] for j in (i - 1, i + 1) if 0 <= j < len(ordered)]


def base_name(name: str) -> str:
    return name.split("@")[0].split("#")[0]


def bucket_of(name: str) -> str | None:
    """The bucket a knob's name carries (`BLOCK_M@small` -> 'small'), or None."""
    return name.split("@", 1)[1].split("#")[0] if "@" in name else None


_BUCKET = re.compile(r"^bucket=(\w+)$")


class KnobError(ValueError):
    """The source does not parse as a kernel with knobs, or a value cannot be set."""


def parse_literal(token: str) -> Value:
    try:
        value = ast.literal_eval(token)
    except (ValueError, SyntaxError):
        return token
    if isinstance(value, (bool, int, float, str)):
        return value
    return token


def _split_choices(text: str) -> list[str]:
    """Tokens of a marker's value list; quoted strings may hold spaces or commas, bare tokens are split on both."""
    return [m.group(0) for m in re.finditer(r"\"[^\"]*\"|'[^']*'|[^\s,]+", text)]


def parse_knobs(text: str) -> list[Knob]:
    """Every marked knob, in file order. A second knob of the same name is called NAME#2 (one per dict, e.g.)."""
    return list(_parse_knobs(text))


@functools.lru_cache(maxsize=256)  # the agent re-reads the same few sources every turn
def _parse_knobs(text: str) -> tuple[Knob, ...]:
    knobs: list[Knob] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines()):
        marker = _MARKER.search(line)
        if marker is None:
            continue
        match = _ASSIGN.match(line[: marker.start()])
        if match is None:
            continue
        value_text = match.group("value").strip()
        value = parse_literal(value_text)
        tokens = _split_choices(marker.group("choices"))
        buckets = [m.group(1) for m in map(_BUCKET.match, tokens) if m]
        choices = tuple(_coerce(parse_literal(tok), value) for tok in tokens if not _BUCKET.match(tok))
        if not choices:
            continue
        if value not in choices:
            choices = tuple(sorted_choices(choices + (value,)))
        name = match.group("name") + (f"@{buckets[0]}" if buckets else "")
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = f"{name}#{seen[name]}"
        quote = value_text[0] if isinstance(value, str) and value_text[:1] in "\"'" else ""
        knobs.append(Knob(name=name, value=value, choices=choices, line=lineno, quote=quote,
                          bucket=buckets[0] if buckets else None))
    return tuple(knobs)


def _coerce(choice: Value, current: Value) -> Value:
    """A choice in the type of the current value (`64` for a float knob is 64.0; `true` for a flag is True)."""
    if isinstance(current, bool) and isinstance(choice, str) and choice.lower() in ("true", "false"):
        return choice.lower() == "true"
    if isinstance(current, float) and isinstance(choice, int) and not isinstance(choice, bool):
        return float(choice)
    return choice


def sorted_choices(choices: tuple[Value, ...]) -> list[Value]:
    if all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in choices):
        return sorted(set(choices))
    unique: list[Value] = []
    for c in choices:
        if c not in unique:
            unique.append(c)
    return unique


def point_of(knobs: list[Knob]) -> Point:
    return {k.name: k.value for k in knobs}


def format_value(knob: Knob, value: Value) -> str:
    if isinstance(value, str) and not isinstance(value, bool):
        if knob.quote:
            return f"{knob.quote}{value}{knob.quote}"
        return value
    return repr(value)


def render(text: str, point: Point) -> str:
    """`text` with each knob named in `point` set to its value; the result must still parse as Python."""
    knobs = {k.name: k for k in parse_knobs(text)}
    lines = text.splitlines(keepends=True)
    for name, value in point.items():
        knob = knobs.get(name)
        if knob is None:
            raise KnobError(f"no knob named {name} in the kernel")
        if value == knob.value and type(value) is type(knob.value):
            continue
        lines[knob.line] = set_line_value(lines[knob.line], format_value(knob, value))
    out = "".join(lines)
    try:
        ast.parse(out)
    except SyntaxError as exc:
        raise KnobError(f"setting {point} breaks the source: {exc.msg} (line {exc.lineno})") from None
    return out


def set_line_value(line: str, new_value: str) -> str:
    """One source line with its knob's value replaced; the rest of the line, marker included, unchanged."""
    ending = line[len(line.rstrip("\r\n")):]
    body = line[: len(line) - len(ending)]
    marker = _MARKER.search(body)
    if marker is None:
        raise KnobError(f"not a knob line: {body.strip()}")
    code = body[: marker.start()]
    match = _ASSIGN.match(code)
    if match is None:
        raise KnobError(f"not a knob line: {body.strip()}")
    start, end = match.span("value")
    return code[:start] + new_value + code[end:] + body[marker.start():] + ending


def format_point(point: Point) -> str:
    """Compact, parseable form used in rationales: `{BLOCK_M=128 num_warps=8}`."""
    return "{" + " ".join(f"{k}={_token(v)}" for k, v in point.items()) + "}"


def _token(value: Value) -> str:
    if isinstance(value, str) and not isinstance(value, bool):
        return repr(value) if (not value or re.search(r"[\s{}=]", value) or value in ("True", "False")) else value
    return repr(value)


_POINT_TAG = re.compile(r"\{((?:[\w#@]+=(?:'[^']*'|[^\s{}]+)\s*)+)\}\s*$")


def parse_point_tag(text: str) -> Point | None:
    """The point written by `format_point` at the end of a rationale, or None."""
    match = _POINT_TAG.search(text or "")
    if match is None:
        return None
    point: Point = {}
    for item in re.finditer(r"([\w#@]+)=('[^']*'|[^\s{}]+)", match.group(1)):
        point[item.group(1)] = parse_literal(item.group(2))
    return point


class PointKey(tuple):
    """A point_key: a plain tuple whose hash is computed once. A kernel of many knobs makes long keys, and a search
    looks each one up thousands of times per pick (is it tried? its tie-break?), which rehashed every element."""

    def __hash__(self) -> int:
        cached = self.__dict__.get("hash")
        if cached is None:
            cached = self.__dict__["hash"] = tuple.__hash__(self)
        return cached


def point_key(point: Point) -> tuple:
    """Hashable, order-independent identity of a point (1 and 1.0 and True kept apart); equal to, and hashed as, the
    plain tuple."""
    return PointKey(sorted((k, type(v).__name__, v) for k, v in point.items()))
