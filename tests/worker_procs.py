"""Evaluation worker processes found in /proc, for tests that kill one mid-evaluation or check none is left."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def parent_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))


def evaluation_workers(mine: Callable[[int], bool] | None = None, *, scoring: bool = False) -> list[int]:
    """Pids of `python -m avo.evaluate.worker` processes that `mine` accepts (default: children of this process);
    with `scoring`, only those that have begun on a candidate's cases (their progress file past import)."""
    mine = mine or (lambda pid: parent_of(pid) == os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if "avo.evaluate.worker" not in (entry / "cmdline").read_bytes().decode(errors="replace"):
                continue
            if not mine(int(entry.name)):
                continue
            if scoring:
                marks = (Path(os.readlink(entry / "cwd")).parent / "progress").read_text().splitlines()
                if not marks or marks[-1].split("\t")[0] not in ("compile", "check"):
                    continue
        except (OSError, ValueError, StopIteration):
            continue
        found.append(int(entry.name))
    return found
