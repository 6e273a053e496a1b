"""Loading the shipped seed kernels, either under Triton's interpreter (CPU) or compiled for the GPU.

Triton decides at decoration time whether a @triton.jit function is interpreted, so TRITON_INTERPRET is set while
the kernel module executes (and while it runs); nothing else in the test session is affected.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def _load(task: str, seed: str, mode: str):
    path = KERNELS / task / seed / "kernel.py"
    spec = importlib.util.spec_from_file_location(f"seed_{task}_{seed}_{mode}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def interpreted_seed(monkeypatch):
    """load(task, seed) -> the seed's module with every kernel running under TRITON_INTERPRET=1."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    return lambda task, seed: _load(task, seed, "interpreted")


@pytest.fixture
def compiled_seed(monkeypatch):
    """load(task, seed) -> the seed's module compiled for the GPU."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    return lambda task, seed: _load(task, seed, "compiled")
