"""Where the folders avo ships beside its package lie: the seed kernels (`kernels/`) and the docs corpus
(`docs_corpus/`). In a checkout (or an editable install) they sit beside the `avo` package; an installed wheel puts
its copies under `<prefix>/share/avo/` (pyproject's data-files), prefix being the environment's, the interpreter's or
the user's (`pip install --user`)."""

from __future__ import annotations

import site
import sys
import sysconfig
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
"""The folder that holds the `avo` package: a checkout's root, or site-packages in an installed wheel."""


def shipped_dir(name: str) -> Path:
    """`name` beside the package in a checkout (one with avo's pyproject.toml: in site-packages a `kernels` beside it
    is another distribution's package), else the first installed copy; the checkout's path when there is none (so
    that a message names where it was looked for)."""
    prefixes = [sysconfig.get_path("data"), sys.prefix, site.USER_BASE or ""]
    checkout = [CHECKOUT / name] if (CHECKOUT / "pyproject.toml").is_file() else []
    for candidate in checkout + [Path(p) / "share" / "avo" / name for p in prefixes if p]:
        if candidate.is_dir():
            return candidate
    return CHECKOUT / name
