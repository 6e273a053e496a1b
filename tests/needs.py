"""What a test needs beyond avo's own dependencies (CuPy, NVRTC, nvcc); without it the test skips and says why.

CI names the modules its install step provides in AVO_TEST_REQUIRE (comma-separated, e.g. `cupy,cuda.bindings`;
`nvrtc` for a libnvrtc CuPy can load; `bwrap` for a working bubblewrap sandbox):
a test that would skip for one of those fails instead, so an install step that went missing cannot pass as a skip.
Tests marked `gpu` skip without a GPU (conftest.py)."""

from __future__ import annotations

import functools
import importlib
import os
from types import ModuleType

import pytest

from avo.evaluate.cuda_compile import find_nvcc

WHY = {
    "cupy": "CuPy is not installed (pip install -e '.[cuda13]', or cuda12)",
    "cuda.bindings": "cuda-bindings is not installed (pip install -e '.[cuda13]', or cuda12)",
    "importlinter.cli": "import-linter is not installed (pip install -e '.[dev]')",
    "ray": "Ray is not installed (pip install -e '.[ray]')",
}


def required() -> set[str]:
    return {name.strip() for name in os.environ.get("AVO_TEST_REQUIRE", "").split(",") if name.strip()}


def module(name: str) -> ModuleType:
    """`name` imported, or the test skips saying what to install (fails where AVO_TEST_REQUIRE names it)."""
    __tracebackhide__ = True  # pytest reports the skip at the test's line, not this one
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        why = WHY.get(name, f"{name} is not installed")
        if name in required():
            pytest.fail(f"{why}, but AVO_TEST_REQUIRE says this install has it ({exc})", pytrace=False)
        pytest.skip(why)


def _nvrtc_missing() -> str | None:
    """Why NVRTC cannot compile here, or None when it can."""
    try:
        from cupy_backends.cuda.libs import nvrtc
    except ImportError:
        return f"NVRTC: {WHY['cupy']}"
    try:
        nvrtc.getVersion()
    except Exception as exc:
        return (f"NVRTC: CuPy finds no libnvrtc (the cuda13/cuda12 extra installs NVIDIA's wheel of it; "
                f"{type(exc).__name__})")
    return None


def _requirement(name: str, missing: str | None):
    """A decorator: nothing when present; a skip saying why when missing; a failure when missing but
    AVO_TEST_REQUIRE names it."""
    if missing is None or name not in required():
        return pytest.mark.skipif(missing is not None, reason=missing or "")

    def fail_instead(test):
        @functools.wraps(test)
        def failing(*args, **kwargs):
            pytest.fail(f"{missing}, but AVO_TEST_REQUIRE says this install has it", pytrace=False)
        return failing

    return fail_instead


nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed (on PATH or in $CUDA_HOME/bin)")
nvrtc = _requirement("nvrtc", _nvrtc_missing())


def _bwrap_missing() -> str | None:
    from avo.evaluate import sandbox

    why = sandbox.why_unavailable()
    return None if why is None else f"no sandbox: {why} ({sandbox.INSTALL})"


bwrap = _requirement("bwrap", _bwrap_missing())
