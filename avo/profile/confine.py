"""The children that run a candidate's code for `avo profile` (ncu and its driver) and `avo inspect` (the Triton
compile capture) run inside the evaluations' OS sandbox (avo.evaluate.sandbox), by the same policy
(EvalConfig.sandbox: on, off, auto): write access to their own scratch folder only, read access to the candidate's
folder, the task file and the programs they start from, the home folder, /root and the runs folder masked,
and compile caches of their own in the scratch folder (as an evaluation worker's: no candidate's kernel binary is
left for another to load, and a cache folder the sandbox shows read-only cannot fail the compile).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from avo.evaluate import sandbox
from avo.evaluate.worker_process import CACHES
from avo.tasks.kernelbench.spec import with_options


class Child(NamedTuple):
    cmd: list[str]
    env: dict[str, str]
    """Set on top of the scrubbed environment: the private caches, when sandboxed."""
    sandboxed: bool


def task_spec_for_child(task_spec: str) -> str:
    """The spec as a child in another working directory reads it: a KernelBench file's path made absolute."""
    return with_options(task_spec)


def command(cmd: Sequence[str], *, mode: str, scratch: Path, candidate: Path | None, task_spec: str,
            hide: Sequence[Path] = (), programs: Sequence[str] = ()) -> Child:
    """`cmd` as it runs on `candidate`: wrapped when `mode` wants the sandbox (refused in one line when it is `on`
    and there is none). `programs`: executables outside the Python install that `cmd` starts (ncu), whose folders
    stay readable where a masked folder holds them. `candidate` None: the library's call, no candidate folder."""
    if not sandbox.wanted(mode):
        return Child(list(cmd), {}, False)
    task_file = Path(task_spec.partition("?")[0])
    readable = [] if candidate is None else [Path(candidate)]
    if task_file.suffix == ".py":
        readable.append(task_file)
    for program in programs:  # the folder a launcher sits in, and the one it links to (ncu finds its parts there)
        readable += [Path(program).parent, Path(os.path.realpath(program)).parent]
    wrapped = sandbox.command(cmd, writable=[Path(scratch)], cwd=Path(scratch), hide=hide, readable=readable)
    return Child(wrapped, {name: str(Path(scratch) / "cache" / sub) for name, sub in CACHES.items()}, True)
