"""The sizes a KernelBench task is checked at: the GPU check suite also runs the interpreter's small size and every
knob at 1 (a row shorter than the block, a one-program grid); the interpreter's sizes are ragged (no product of two
knobs a multiple of 128) and resize list knobs, keep counts above 1, and say so when the size aimed at is out of
reach. Buggy twins (tests/evaluate/kb_cheats) fail under the interpreter, and the softmax one on the GPU too."""

from __future__ import annotations

import math
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from avo import tasks
from avo.config import EvalConfig
from avo.evaluate.harness import Evaluator
from avo.gpus import PROFILES
from avo.tasks.kernelbench.task import TINY_ELEMENTS

pytestmark = pytest.mark.usefixtures("private_cache")

REPO = Path(__file__).resolve().parents[3]
PROBLEMS = Path(__file__).parent / "kb_problems"
SOFTMAX = REPO / "examples" / "kernelbench" / "problems" / "23_Softmax.py"
CHEATS = REPO / "tests" / "evaluate" / "kb_cheats"


def sizes(task, suite: str) -> list[dict]:
    return [c.params["sizes"] for c in task.cases(suite)]


def test_the_gpu_check_suite_runs_a_small_size_and_every_knob_at_one():
    """23_Softmax's file size and ragged three quarters are rows of 393216 and 294904: longer than any block."""
    task = tasks.load(str(SOFTMAX))
    check = task.cases("check")
    small = task.cases("tiny")[0].params["sizes"]
    assert sizes(task, "check")[4:] == [small, {"batch_size": 1, "dim": 1}]
    assert small["dim"] < 128 and all(c.params["cast"] is None and c.dtype == "float32" for c in check)
    assert len({task._measure(c.params["sizes"], None).signature for c in check[3:]}) == 3


def test_knobs_go_to_one_only_where_the_model_allows(tmp_path):
    """A model that needs two channels keeps them; the other knob still goes to 1."""
    problem = tmp_path / "pairs.py"
    problem.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        a, b = x.chunk(2, dim=1)\n        return a * b.sigmoid()\n\n\n"
        "batch_size = 256\nchannels = 64\n\n\ndef get_inputs():\n"
        "    assert channels % 2 == 0\n    return [torch.randn(batch_size, channels)]\n\n\n"
        "def get_init_inputs():\n    return []\n")
    task = tasks.load(str(problem))
    assert sizes(task, "check")[-1] == {"batch_size": 1, "channels": task.cases("tiny")[0].params["sizes"]["channels"]}


def test_interpreter_sizes_are_ragged():
    """19_ReLU at 4096 x 393216 was 128 x 96 and 96 x 72 under the interpreter: 12288 and 6912 elements, multiples of
    256 both."""
    task = tasks.load(str(PROBLEMS / "relu.py"))
    tiny = sizes(task, "tiny")
    for s in tiny[:2]:
        assert all(n % 16 for n in s.values()), s
    for s in tiny:
        assert math.prod(s.values()) % 128, s
        assert task._measure(s, None).elements <= TINY_ELEMENTS


def test_list_knobs_are_resized_and_counts_stay_above_one():
    """1_MLP's `layer_sizes = [16384, 16384]` was no knob: its 16384-wide layers stayed while the batch, input and
    output sizes went to 1, and an honest solution ran past 300 s under the interpreter."""
    task = tasks.load(str(PROBLEMS / "mlp.py"))
    assert task.problem.knobs == ["batch_size", "input_size", "layer_sizes", "output_size"]
    for case in task.cases("tiny"):
        s = case.params["sizes"]
        assert isinstance(s["layer_sizes"], list) and len(s["layer_sizes"]) == 2
        assert all(2 <= n < 1024 for n in [s["batch_size"], s["input_size"], *s["layer_sizes"], s["output_size"]])
        assert task._measure(s, None).elements <= TINY_ELEMENTS
        x, = task.make_inputs(case, 0, "cpu")
        layers = [m for m in task._variant_of((x,)).library_model.network if hasattr(m, "weight")]
        assert [m.out_features for m in layers] == [*s["layer_sizes"], s["output_size"]]
        assert task.library(x).shape == (s["batch_size"], s["output_size"])
    assert task.size_notes("tiny") == []


def test_a_size_target_out_of_reach_is_noted_and_counts_stay_above_one():
    """LeNet-5's fixed layers hold 62k parameters: no batch gets it under the interpreter's target, and halving the
    batch and class count to 1 (where it ran before) only made the problem degenerate."""
    task = tasks.load(str(PROBLEMS / "lenet5.py"))
    for s in sizes(task, "tiny"):
        assert s["batch_size"] >= 2 and s["num_classes"] >= 2, s
    small = task.cases("tiny")[0]
    assert task._measure(small.params["sizes"], None).elements > TINY_ELEMENTS
    note, = task.size_notes("tiny")
    assert f"the interpreter's size {small.name} has" in note and "over the 32,768 aimed at" in note
    assert task.size_notes("check") == []


# -- the twins through the evaluator ---------------------------------------------------------------------------------
TWINS = {  # folder -> (problem, status, rule, phrase)
    CHEATS / "23_Softmax_short_rows_nan": (SOFTMAX, "incorrect", "check.nonfinite", "batch_size=120,dim=88"),
    CHEATS / "19_ReLU_unmasked": (PROBLEMS / "relu.py", "incorrect", "check.out_of_bounds",
                                  "case batch_size=120,dim=88: the call wrote past the end of a (120, 88) float32"),
    PROBLEMS / "candidates" / "relu_honest": (PROBLEMS / "relu.py", "correct", None, ""),
}


def evaluate(folder: Path, problem: Path, root: Path, device: str = "interpret"):
    copy = root / folder.name
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("__pycache__"))
    if device == "interpret":
        config = EvalConfig(check_suite="tiny", bench_suite="", seed=5, import_timeout_s=120.0,
                            check_timeout_s=180.0)
    else:
        config = EvalConfig(check_suite="check", bench_suite="", seed=5)
    return Evaluator(str(problem), device=device, gpu=PROFILES["h200"], config=config).evaluate(copy)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("twins")
    with ThreadPoolExecutor(max(1, min(2, os.cpu_count() or 1))) as pool:
        futures = {f: pool.submit(evaluate, f, TWINS[f][0], root) for f in TWINS}
        return {f: future.result() for f, future in futures.items()}


@pytest.mark.parametrize("folder", list(TWINS), ids=lambda f: f.name)
def test_buggy_twins_fail_under_the_interpreter(verdicts, folder):
    _, status, rule, phrase = TWINS[folder]
    result = verdicts[folder]
    assert result.status == status, result.message
    if rule:
        assert result.rule == rule, result.message
    assert phrase in result.message


@pytest.mark.gpu
def test_the_short_rows_twin_fails_the_gpu_check_suite(tmp_path):
    result = evaluate(CHEATS / "23_Softmax_short_rows_nan", SOFTMAX, tmp_path, device="cuda")
    assert (result.status, result.rule) == ("incorrect", "check.nonfinite"), result.message
    failed = [c.case for c in result.cases if c.correct is False]
    assert failed and all(not c.startswith("batch_size=4096") and "294904" not in c for c in failed), failed


@pytest.mark.gpu
def test_the_softmax_solution_passes_the_gpu_check_suite_with_its_small_sizes(tmp_path):
    result = evaluate(REPO / "examples" / "kernelbench" / "solutions" / "23_Softmax", SOFTMAX, tmp_path, device="cuda")
    assert result.status == "correct", result.message
    assert [c.case for c in result.cases][-2:] == ["batch_size=120,dim=88", "batch_size=1,dim=1"]
