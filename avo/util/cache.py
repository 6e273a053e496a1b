"""Where avo keeps what it can rebuild: `$AVO_CACHE_DIR`, else `$XDG_CACHE_HOME/avo`, else `~/.cache/avo`."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The cache folder (not created here); a `~` in either variable means the home folder."""
    if os.environ.get("AVO_CACHE_DIR"):
        return Path(os.environ["AVO_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "avo"
