"""Loading the shipped seed kernels: compiled for the GPU in this process, or under Triton's interpreter in a child
process that has TRITON_INTERPRET=1 from its start (see interpret_tiny.py for why). Either can load a variant: a copy
of the seed with some `# avo: tune` knobs set, as the heuristic agent writes them."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from avo.agent.heuristic.knobs import render

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def _source(task: str, seed: str, settings: dict, folder: Path) -> Path:
    """The seed's kernel.py, or with knobs given a copy of it in `folder` with those knobs set."""
    path = KERNELS / task / seed / "kernel.py"
    if not settings:
        return path
    variant = folder / f"{seed}_variant.py"
    variant.write_text(render(path.read_text(), settings))
    return variant


@pytest.fixture
def interpreted_tiny_check(tmp_path):
    """run(task, seed, **knobs) -> per tiny case {case, layout_ok, err, tol}, computed under the interpreter in a
    child."""

    def run(task: str, seed: str, **settings) -> list[dict]:
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        script = Path(__file__).with_name("interpret_tiny.py")
        done = subprocess.run([sys.executable, str(script), task, str(_source(task, seed, settings, tmp_path))],
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    return run


@pytest.fixture
def compiled_seed(monkeypatch, tmp_path):
    """load(task, seed, **knobs) -> the seed's module compiled for the GPU."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)

    def load(task: str, seed: str, **settings):
        path = _source(task, seed, settings, tmp_path)
        name = f"seed_{task}_{seed}_{'variant' if settings else 'compiled'}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
