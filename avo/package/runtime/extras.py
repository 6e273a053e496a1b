"""What avo.cuda asks of avo's extras when CuPy is missing, answered from this package's own requirements."""

from __future__ import annotations

from ._guard import MANIFEST


def suggested_extra() -> tuple[str, str]:
    return "cuda", "this package's kernel is CUDA C++, compiled and launched through CuPy"


def install_command(extra: str) -> str:
    return "pip install " + " ".join(f"'{r}'" for r in MANIFEST["requirements"] if r.split(">")[0] != "torch")
