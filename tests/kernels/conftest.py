"""Loading the shipped seed kernels: compiled for the GPU in this process, or under Triton's interpreter in a child
process that has TRITON_INTERPRET=1 from its start (see interpret_tiny.py for why)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
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
def interpreted_tiny_check():
    """run(task, seed) -> per tiny case {case, layout_ok, err, tol}, computed under the interpreter in a child."""

    def run(task: str, seed: str) -> list[dict]:
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        script = Path(__file__).with_name("interpret_tiny.py")
        done = subprocess.run([sys.executable, str(script), task, str(KERNELS / task / seed / "kernel.py")],
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    return run


@pytest.fixture
def compiled_seed(monkeypatch):
    """load(task, seed) -> the seed's module compiled for the GPU."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    return lambda task, seed: _load(task, seed, "compiled")
