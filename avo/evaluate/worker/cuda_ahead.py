"""Compile-ahead for CUDA C++ candidates: every build kernel.py declared, compiled by NVRTC in parallel before the
check stage, so the first launches find their cubins in the process's cache (avo.cuda).

NVRTC compiles a build on its first launch, one after another on the launching thread, and one build of a Hopper
attention kernel takes seconds; a seed that declares one build per configuration (per head dim and dtype, per tile
shape) paid the sum of them. Here each build compiles in a forked child of the worker (precompile.py's children:
compiling for a named architecture needs no GPU), which leaves its cubin and lowered names in files of this
evaluation's own folder; the worker reads them into the cache. Best effort, as for Triton: a build that fails to
compile, raised a Sentinel finding, or was not done in time is left to its first launch, which compiles it again
and reports any error as before.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from avo.evaluate.worker.precompile import CHILD_LIMIT_S, in_children, Job


@dataclass
class CudaOutcome:
    builds: int = 0
    """Builds declared and not yet in the cache."""
    compiled: int = 0
    """Of those, the ones compiled ahead."""


def compile_builds_ahead(folder: Path, arch: str, workers: int, limit_s: float = CHILD_LIMIT_S) -> CudaOutcome:
    """Every build declared for `folder` compiled for `arch` in parallel children, into avo.cuda's cubin cache."""
    from avo import cuda

    by_key = {}
    for build in cuda.declared_builds(folder):
        module = cuda.CudaModule(build)
        try:
            by_key.setdefault(module.cache_key(arch), module)
        except OSError:  # its source is gone: the first launch says so
            continue
    todo = [(key, module) for key, module in by_key.items() if key not in cuda._cubins]
    outcome = CudaOutcome(builds=len(todo))
    if not todo:
        return outcome
    scratch = Path(tempfile.mkdtemp(prefix="cubins-", dir=Path.cwd()))
    jobs = [Job(compile=lambda module=module, out=scratch / str(i): _compile_into(module, arch, out))
            for i, (_, module) in enumerate(todo)]
    in_children(jobs, workers, limit_s)
    for i, (key, module) in enumerate(todo):
        cubin, names = scratch / f"{i}.cubin", scratch / f"{i}.json"
        if cubin.is_file() and names.is_file():  # written last: the cubin is whole
            written = json.loads(names.read_text())
            cuda._cubins[key] = (cubin.read_bytes(), written["names"])
            cuda._notices[cuda.notice_key(module.build)] = tuple(written["notices"])
            outcome.compiled += 1
    return outcome


def _compile_into(module, arch: str, out: Path) -> None:
    """In a child: compile, then write the cubin, then the lowered names and ptxas's notices (whose file marks the
    pair complete)."""
    from avo import cuda

    cubin = module.compile(arch)
    out.with_suffix(".cubin").write_bytes(cubin)
    notices = cuda._notices.get(cuda.notice_key(module.build), ())
    out.with_suffix(".json").write_text(json.dumps({"names": module._mapping, "notices": list(notices)}))
