"""Which of avo's CUDA extras fits this machine: `avo[cuda13]` or `avo[cuda12]`, by the CUDA major torch was built
for. What is installed is read from package metadata (CuPy's CUDA from its distribution's name, cupy-cuda13x and so
on), so none of this needs a GPU or imports CuPy, except for a CuPy built from source, which is asked directly."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import metadata

CUDA_EXTRAS = {13: "cuda13", 12: "cuda12"}
"""CUDA major -> the extra that installs CuPy and cuda-bindings for it."""
DEFAULT_CUDA = 13
"""The CUDA of the GPU images avo targets: the extra to suggest when torch is a CPU build."""
_CUPY_WHEEL = re.compile(r"cupy-cuda(\d+)x$")


@dataclass(frozen=True)
class Installed:
    name: str
    version: str
    cuda: int | None
    """The CUDA major it is built for; None where that cannot be told."""


def torch_cuda() -> int | None:
    """The CUDA major of the installed torch; None for a CPU build or no torch."""
    try:
        import torch
    except ImportError:
        return None
    return int(torch.version.cuda.split(".")[0]) if torch.version.cuda else None


def cupy_installs() -> list[Installed]:
    """Every installed CuPy distribution (more than one means they overwrite each other's files)."""
    found = {}
    for dist in metadata.distributions():
        name = _canonical(dist.metadata["Name"] or "")
        wheel = _CUPY_WHEEL.match(name)
        if wheel:
            found[name] = Installed(name, dist.version, int(wheel.group(1)))
        elif name == "cupy":
            found[name] = Installed(name, dist.version, _cupy_runtime())
    return sorted(found.values(), key=lambda i: i.name)


def cuda_bindings() -> Installed | None:
    try:
        version = metadata.version("cuda-bindings")
    except metadata.PackageNotFoundError:
        return None
    major = version.split(".")[0]
    return Installed("cuda-bindings", version, int(major) if major.isdigit() else None)


def suggested_extra() -> tuple[str, str]:
    """(extra, why): the extra for torch's CUDA, or the default one when torch is a CPU build."""
    cuda = torch_cuda()
    if cuda in CUDA_EXTRAS:
        return CUDA_EXTRAS[cuda], f"torch is built for CUDA {cuda}"
    others = ", ".join(f"{extra} for CUDA {major}" for major, extra in CUDA_EXTRAS.items() if major != DEFAULT_CUDA)
    what = "a CPU build" if cuda is None else f"built for CUDA {cuda}, which avo has no extra for"
    return CUDA_EXTRAS[DEFAULT_CUDA], f"torch is {what}; {others}"


def install_command(extra: str) -> str:
    """The pip command for the packages of `extra`, read from avo's own metadata (`avo` on the package index is
    another project, so `pip install 'avo[...]'` is not safe to suggest)."""
    requirements = extra_requirements(extra)
    if not requirements:
        return f"pip install -e '.[{extra}]' in avo's checkout"
    return "pip install " + " ".join(f"'{r}'" for r in requirements)


def extra_requirements(extra: str) -> list[str]:
    """Requirements avo's installed metadata lists for `extra`, e.g. ['cupy-cuda13x>=13.6', ...]."""
    try:
        requires = metadata.requires("avo") or []
    except metadata.PackageNotFoundError:
        return []
    marker = re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")
    return [r.split(";")[0].strip() for r in requires if ";" in r and marker.search(r.split(";", 1)[1])]


def _cupy_runtime() -> int | None:
    """A source-built CuPy's CUDA major, from the CUDA runtime it was built against (no GPU needed)."""
    try:
        import cupy

        return cupy.cuda.runtime.runtimeGetVersion() // 1000
    except Exception:
        return None


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
