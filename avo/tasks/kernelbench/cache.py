"""Measurements of a KernelBench problem kept on disk between processes.

The evaluator loads the task afresh in every child process, and measuring a large model on the meta device can take
seconds per size (an LSTM decomposes into thousands of ops per call). Results are keyed by the file's text, avo's
measuring rules and torch's version, so an edited file or a new torch measures again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from avo.util.atomic import write_text_atomic
from avo.util.cache import cache_root

RULES_VERSION = 3
"""Bump when what a measurement holds, or how sizes are chosen, changes."""


@dataclass(frozen=True)
class Measure:
    """One size of the problem, measured on the meta device (sizes in the cast dtype)."""

    signature: tuple
    output_shape: tuple[int, ...]
    output_dtype: str
    flops: float
    input_bytes: int
    output_bytes: int
    param_bytes: int
    elements: int
    """Input, output and parameter elements together: what the interpreter has to chew through."""


def _encode_signature(sig: tuple) -> list:
    return [["value", x[1]] if x[0] == "value" else [list(x[0]), str(x[1]).removeprefix("torch.")] for x in sig]


def _decode_signature(sig: list) -> tuple:
    import torch

    return tuple(("value", x[1]) if x[0] == "value" else (tuple(x[0]), getattr(torch, x[1])) for x in sig)


class MeasureCache:
    """key (sizes, dtype) -> Measure, or None for a size the model cannot run."""

    def __init__(self, source: str, name: str):
        import torch

        digest = hashlib.sha256(f"{RULES_VERSION}\n{torch.__version__}\n{source}".encode()).hexdigest()[:16]
        self.path = cache_root() / "kernelbench" / "measures" / f"{name}-{digest}.json"
        try:
            self.entries: dict[str, Any] = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.entries = {}
        self.dirty = False

    @staticmethod
    def key(sizes: dict[str, Any], dtype: Any) -> str:
        return json.dumps([sorted(sizes.items()), str(dtype)])

    def __contains__(self, key: str) -> bool:
        return key in self.entries

    def get(self, key: str) -> Measure | None:
        entry = self.entries[key]
        if entry is None:
            return None
        return Measure(**{**entry, "signature": _decode_signature(entry["signature"]),
                          "output_shape": tuple(entry["output_shape"])})

    def put(self, key: str, measured: Measure | None) -> None:
        if measured is None:
            self.entries[key] = None
        else:
            entry = dict(vars(measured))
            entry["signature"] = _encode_signature(measured.signature)
            self.entries[key] = entry
        self.dirty = True

    def save(self) -> None:
        """Best effort: a cache that cannot be written only costs the next process the measuring time."""
        if not self.dirty:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(self.path, json.dumps(self.entries))
            self.dirty = False
        except OSError:
            pass
