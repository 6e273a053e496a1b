"""The children that run a candidate's code for `avo profile` (ncu and its driver) and `avo inspect` (the Triton
compile capture) run inside the evaluations' OS sandbox (avo.evaluate.sandbox), by the same policy
(EvalConfig.sandbox: on, off, auto): write access to their own scratch folder only, read access to the candidate's
folder, the task file's folder and the programs they start from, the home folder, /root and the runs folder masked.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from avo.evaluate import sandbox
from avo.tasks.kernelbench.spec import with_options


def task_spec_for_child(task_spec: str) -> str:
    """The spec as a child in another working directory reads it: a KernelBench file's path made absolute."""
    return with_options(task_spec)


def command(cmd: Sequence[str], *, mode: str, scratch: Path, candidate: Path, task_spec: str,
            hide: Sequence[Path] = (), programs: Sequence[str] = ()) -> tuple[list[str], bool]:
    """`cmd` as it runs on `candidate`, and whether it is sandboxed: wrapped when `mode` wants the sandbox (refused
    in one line when it is `on` and there is none). `programs`: executables outside the Python install that `cmd`
    starts (ncu), whose folders stay readable where a masked folder holds them."""
    if not sandbox.wanted(mode):
        return list(cmd), False
    task_file = Path(task_spec.partition("?")[0])
    readable = [Path(candidate)] + ([task_file.parent] if task_file.suffix == ".py" else [])
    for program in programs:  # the folder a launcher sits in, and the one it links to (ncu finds its parts there)
        readable += [Path(program).parent, Path(os.path.realpath(program)).parent]
    wrapped = sandbox.command(cmd, writable=[Path(scratch)], cwd=Path(scratch), hide=hide, readable=readable)
    return wrapped, True
