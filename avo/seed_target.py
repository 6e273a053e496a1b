"""Whether a seed's CUDA sources can run on the chosen GPU, checked before any work.

PTX's wgmma (warpgroup MMA) and setmaxnreg exist only on sm_90a: a .cu that issues them cannot be built for, or run
on, a Blackwell (sm_100a), whose tensor cores are driven by tcgen05 instead. mma.sync, cp.async, TMA and mbarriers
are on both, so seeds built on those are not refused.
"""

from __future__ import annotations

import re
from pathlib import Path

from avo.cuda import HEADER_SUFFIXES
from avo.errors import UserError

# Instruction spellings as they appear in inline PTX (comments naming them do not match).
HOPPER_ONLY = re.compile(r"\b(wgmma\.(?:mma_async|fence|commit_group|wait_group)|setmaxnreg\.(?:inc|dec))")
SOURCE_SUFFIXES = (".cu", *HEADER_SUFFIXES)
"""What the CUDA compile path reads (avo.cuda): sources and headers, in subfolders too."""


def hopper_only_instructions(seed_dir: Path) -> dict[str, str]:
    """PTX base instruction -> first source file (name) that issues it, over the seed folder's CUDA sources."""
    found: dict[str, str] = {}
    for path in sorted(Path(seed_dir).rglob("*")):
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file() or "__pycache__" in path.parts:
            continue
        for match in HOPPER_ONLY.finditer(path.read_text(errors="replace")):
            found.setdefault(match.group(1).split(".")[0], path.relative_to(seed_dir).as_posix())
    return found


def check_seed_for_gpu(seed_dir: Path, gpu, role: str = "seed") -> None:
    """UserError when `seed_dir` issues sm_90a-only instructions and `gpu` is not a sm_90a GPU, naming the seeds
    beside it that can be used instead. `role` names the folder in the message (seed, candidate)."""
    if gpu.arch == "sm_90a":
        return
    found = hopper_only_instructions(seed_dir)
    if not found:
        return
    what = " and ".join(f"{name} ({source})" for name, source in found.items())
    others = sorted(p.name for p in Path(seed_dir).parent.glob("triton_*") if (p / "kernel.py").is_file())
    names = " or ".join(filter(None, [", ".join(others[:-1]), others[-1]])) if others else ""
    flag = "--seed-kernel " if role == "seed" else ""
    instead = f"a Triton seed ({flag}{names})" if others else "a seed without wgmma"
    raise UserError(f"the {role} {seed_dir} issues {what}, Hopper (sm_90a) instructions that the {gpu.name} "
                    f"({gpu.arch}) does not have: use {instead}, or run it on an h100 or h200")


HOPPER_SEEDS = {"attention": "cuda_fa3", "gemm": "cuda_wgmma"}
"""The shipped CUDA seeds that beat the library on Hopper (BENCHMARKS.md), beside each task's Triton default."""


def machine_default_seed(task, gpu, device: str) -> Path:
    """The seed `avo evolve` starts from when none is named: on a Hopper GPU that can run CUDA C++ candidates (CuPy
    and cuda-bindings importable, the `cuda13`/`cuda12` extra), the task's Hopper CUDA seed; otherwise (interpreter,
    other GPUs, no CuPy) the portable Triton seed the task names."""
    import importlib.util

    default = Path(task.default_seed())
    hopper = default.parent / HOPPER_SEEDS.get(getattr(task, "name", ""), "")
    if device != "cuda" or gpu.arch != "sm_90a" or hopper == default.parent or not (hopper / "kernel.py").is_file():
        return default
    try:
        ready = all(importlib.util.find_spec(m) is not None for m in ("cupy", "cuda.bindings"))
    except (ImportError, ValueError):
        ready = False
    return hopper if ready else default
