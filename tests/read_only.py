"""A folder made unwritable for a test, even to root (who ignores chmod): immutable through chattr there."""

from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def read_only_tree(path: Path):
    path = Path(path)
    root = os.geteuid() == 0
    if root and (shutil.which("chattr") is None
                 or subprocess.run(["chattr", "-R", "+i", str(path)], capture_output=True).returncode):
        pytest.skip("running as root where chattr cannot make a folder read-only")
    folders = [p for p in [path, *path.rglob("*")] if p.is_dir()]
    if not root:
        for folder in folders:
            folder.chmod(0o555)
    try:
        yield path
    finally:
        if root:
            subprocess.run(["chattr", "-R", "-i", str(path)], capture_output=True)
        else:
            for folder in folders:
                folder.chmod(0o755)
