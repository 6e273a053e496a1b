"""What a test needs beyond avo's own dependencies (CuPy, NVRTC, nvcc); without it the test skips and says why.

CI names the modules its install step provides in AVO_TEST_REQUIRE (comma-separated, e.g. `cupy,cuda.bindings`):
a test that would skip for one of those fails instead, so an install step that went missing cannot pass as a skip.
Tests marked `gpu` skip without a GPU (conftest.py)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

from avo.evaluate.cuda_compile import find_nvcc

WHY = {
    "cupy": "CuPy is not installed (pip install -e '.[cuda13]', or cuda12)",
    "cuda.bindings": "cuda-bindings is not installed (pip install -e '.[cuda13]', or cuda12)",
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
        return (f"NVRTC: CuPy finds no libnvrtc (it comes with the CUDA toolkit or torch's CUDA wheels; "
                f"{type(exc).__name__})")
    return None


nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed (on PATH or in $CUDA_HOME/bin)")
_NVRTC_MISSING = _nvrtc_missing()
nvrtc = pytest.mark.skipif(_NVRTC_MISSING is not None, reason=_NVRTC_MISSING or "")
