"""Loading the shipped seed kernels: compiled for the GPU in this process, or under Triton's interpreter in a child
process that has TRITON_INTERPRET=1 from its start (see interpret_tiny.py for why)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
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


def with_settings(source: str, settings: dict[str, object]) -> str:
    """The kernel source with some `# avo: tune` knobs set to other values (each must be present)."""
    for name, value in settings.items():
        source, n = re.subn(rf"^{name} = \S+(  # avo: tune )", rf"{name} = {value}\1", source, flags=re.M)
        assert n == 1, f"no knob {name}"
    return source


@pytest.fixture
def interpreted_tiny_check(tmp_path):
    """run(task, seed, **knobs) -> per tiny case {case, layout_ok, err, tol}, computed under the interpreter in a
    child; knobs given are set in a copy of the seed first."""

    def run(task: str, seed: str, **settings) -> list[dict]:
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        script = Path(__file__).with_name("interpret_tiny.py")
        path = KERNELS / task / seed / "kernel.py"
        if settings:
            path = tmp_path / f"{seed}.py"
            path.write_text(with_settings((KERNELS / task / seed / "kernel.py").read_text(), settings))
        done = subprocess.run([sys.executable, str(script), task, str(path)],
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    return run


@pytest.fixture
def compiled_seed(monkeypatch, tmp_path):
    """load(task, seed, **knobs) -> the seed's module compiled for the GPU (knobs given set in a copy)."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)

    def load(task: str, seed: str, **settings):
        if not settings:
            return _load(task, seed, "compiled")
        path = tmp_path / f"{seed}.py"
        path.write_text(with_settings((KERNELS / task / seed / "kernel.py").read_text(), settings))
        spec = importlib.util.spec_from_file_location(f"seed_{task}_{seed}_variant", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
