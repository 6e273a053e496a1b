"""`--device interpret` the same wherever it runs: on a machine with GPUs (its workers see none) and under Triton
3.6's interpreter with NumPy 2.4 or newer (every scalar is a one-element array there, and NumPy refuses `int()` of
one, so a runtime loop bound such as `range(0, tl.cdiv(K, BLOCK_K))` failed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from avo.config import EvalConfig
from avo.evaluate.harness import Evaluator, scrubbed_env
from avo.gpus import PROFILES

REPO = Path(__file__).resolve().parents[2]
SEEDS = [("attention", "triton_fa2"), ("attention", "triton_naive"), ("gemm", "triton_tiled"),
         ("gemm", "triton_naive"), ("gemm", "triton_tma_persistent")]
ONE_ELEMENT = "only 0-dimensional arrays can be converted to Python scalars"

# Triton 3.6's interpreter reads a tensor as an index by int() of its one-element array; run in a child with
# TRITON_INTERPRET=1, with that behaviour put back on the installed Triton, with or without the mend (argv[1]).
AS_TRITON_36 = """
import json, sys
import numpy as np
from triton.runtime import interpreter
from avo.evaluate.interpreter import fix_scalar_index, scalar_index_broken

current = interpreter._patch_lang_tensor

def as_in_36(tensor, *args, **kwargs):
    current(tensor, *args, **kwargs)
    tensor.__index__ = lambda self: int(self.handle.data)

interpreter._patch_lang_tensor = as_in_36
broken = scalar_index_broken()
fixed = fix_scalar_index() if sys.argv[1] == "mend" else False
import importlib.util, torch
spec = importlib.util.spec_from_file_location("seed", sys.argv[2])
seed = importlib.util.module_from_spec(spec)
spec.loader.exec_module(seed)
a, b = torch.randn(7, 17, dtype=torch.float16), torch.randn(17, 33, dtype=torch.float16)
try:
    error = (seed.gemm(a, b).double() - a.double() @ b.double()).abs().max().item()
except Exception as exc:
    error = repr(exc)
print(json.dumps({"broken": broken, "fixed": fixed, "error": error}))
"""


def _as_triton_36(mend: bool) -> dict:
    try:
        int(__import__("numpy").zeros(1))
        pytest.skip("this NumPy still converts a one-element array to int (< 2.4): nothing to mend")
    except TypeError:
        pass
    kernel = REPO / "kernels" / "gemm" / "triton_tiled" / "kernel.py"
    done = subprocess.run([sys.executable, "-c", AS_TRITON_36, "mend" if mend else "as-is", str(kernel)],
                          env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_triton_36s_interpreter_fails_on_the_gemm_seeds_k_loop_as_it_stands():
    seen = _as_triton_36(mend=False)
    assert seen["broken"] and not seen["fixed"]
    assert ONE_ELEMENT in seen["error"]


def test_the_mended_interpreter_runs_the_gemm_seed_correctly():
    seen = _as_triton_36(mend=True)
    assert seen["broken"] and seen["fixed"]
    assert isinstance(seen["error"], float) and seen["error"] < 0.05, seen["error"]


def test_an_interpreter_worker_sees_no_gpu(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    env = scrubbed_env("interpret")
    assert env["TRITON_INTERPRET"] == "1" and env["CUDA_VISIBLE_DEVICES"] == ""
    assert scrubbed_env("cuda")["CUDA_VISIBLE_DEVICES"] == "0,1"


def test_an_interpreter_evaluation_on_a_machine_with_a_gpu_is_the_cpus():
    """torch in the worker reports a GPU unless CUDA_VISIBLE_DEVICES hides it (visible_gpu/sitecustomize.py):
    the seed is scored as on a machine without one, against the CPU library."""
    fake = str(Path(__file__).with_name("visible_gpu"))
    config = EvalConfig(check_suite="tiny", bench_suite="", seed=11)
    evaluator = Evaluator("gemm", device="interpret", gpu=PROFILES["h200"], config=config,
                          env={"PYTHONPATH": os.pathsep.join([fake, os.environ.get("PYTHONPATH", "")])})
    result = evaluator.evaluate(REPO / "kernels" / "gemm" / "triton_tiled")
    assert result.status == "correct", result.message
    assert result.library == "torch.matmul (cpu)" and result.versions["gpu_device"] == "none (interpreter)"


@pytest.fixture(scope="module")
def old_interpreter():
    """Skips unless this Triton's interpreter needs the mend with this NumPy (asked in a child: whether Triton
    interprets is fixed at its first import)."""
    done = subprocess.run([sys.executable, "-c", "from avo.evaluate.interpreter import scalar_index_broken as b; "
                           "print(b())"], env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    if done.stdout.strip() != "True":
        pytest.skip("this Triton's interpreter works with this NumPy as it is (Triton 3.7 and newer, or NumPy "
                    "before 2.4)")


@pytest.mark.gpu
@pytest.mark.parametrize("task,seed", SEEDS)
def test_every_triton_seed_is_correct_under_an_old_interpreter_beside_a_gpu(task, seed, old_interpreter):
    """Where Triton 3.6 is installed (the GPU image's torch pins it) and a GPU is present: each seed through the
    evaluator under --device interpret, as `avo bench SEED --device interpret` scores it."""
    config = EvalConfig(check_suite="tiny", bench_suite="", seed=11)
    result = Evaluator(task, device="interpret", gpu=PROFILES["h200"], config=config).evaluate(
        REPO / "kernels" / task / seed)
    assert result.status == "correct", result.message
