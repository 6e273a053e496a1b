"""What the static guard reports: one forbidden construct, with its rule, file and line."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    rule: str
    file: str
    line: int
    what: str
    kind: str = ""
    """'torch' for a library call through torch (an op, a tensor method, @, a layer): what `ops=partial` allows."""

    @property
    def check(self) -> str:
        return f"{self.rule}:{self.kind}" if self.kind else self.rule

    def text(self) -> str:
        return f"{self.file}:{self.line} {self.what}" if self.line else f"{self.file} {self.what}"
