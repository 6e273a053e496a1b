"""`--ops strict` means that no torch compute op runs in ModelNew's call, whatever the reference used: cheating twins
that rewrite KernelBench problems into other torch ops (softmax via exp/amax/sum, relu via clamp or where, A B^T via
a broadcast multiply-sum, a sum via mean times n, argmax via max().indices, relu into a zeroed buffer with add_) are
rejected naming the ops, with or without a kernel that copies the result; under `--ops partial` the same copy is
allowed, as it is today. The shipped honest solutions pass strict too (test_kernelbench_users, test_kernelbench_eval).
"""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from avo.config import EvalConfig
from avo.evaluate.harness import Evaluator
from avo.gpus import PROFILES

pytestmark = pytest.mark.usefixtures("private_cache")

CHEATS = Path(__file__).parent / "kb_cheats"
PROBLEMS = {p.stem: p for p in [*(CHEATS / "problems").glob("*.py"),
                                 Path(__file__).resolve().parents[2] / "examples/kernelbench/problems/23_Softmax.py"]}
STRICT_OPS = "torch may only allocate, view and copy"

# (twin folder, spec options) -> (status, rule, phrases its message must hold)
EXPECTED = {
    ("23_Softmax_exp_amax_sum", ""): ("rejected", "static.no_kernel", ["defines no kernel of its own"]),
    ("23_Softmax_exp_amax_sum", "?ops=partial"): ("rejected", "static.no_kernel", ["defines no kernel of its own"]),
    ("23_Softmax_exp_amax_sum_copied", ""):
        ("rejected", "runtime.torch_op", ["aten.amax", "aten.div", "aten.exp", "aten.sub", "aten.sum", STRICT_OPS]),
    ("23_Softmax_exp_amax_sum_copied", "?ops=partial"): ("correct", None, []),
    ("19_ReLU_clamp", ""): ("rejected", "runtime.torch_op", ["aten.clamp", STRICT_OPS]),
    ("19_ReLU_where", ""): ("rejected", "runtime.torch_op", ["aten.gt", "aten.where", STRICT_OPS]),
    ("19_ReLU_zeros_add", ""): ("rejected", "runtime.torch_op", ["aten.add_", "aten.clamp_", STRICT_OPS]),
    ("17_Matmul_with_transposed_B_broadcast", ""): ("rejected", "runtime.torch_op", ["aten.mul", "aten.sum"]),
    ("47_Sum_reduction_over_a_dimension_mean", ""): ("rejected", "runtime.torch_op", ["aten.mean", "aten.mul"]),
    ("51_Argmax_over_a_dimension_max_indices", ""): ("rejected", "runtime.torch_op", ["aten.max"]),
}


def problem_of(twin: str) -> Path:
    return next(path for stem, path in PROBLEMS.items() if twin.startswith(stem + "_"))


def evaluate(twin: str, options: str, root: Path):
    folder = root / f"{twin}{options.replace('?', '_').replace('=', '_')}"
    shutil.copytree(CHEATS / twin, folder, ignore=shutil.ignore_patterns("__pycache__"))
    config = EvalConfig(check_suite="tiny", bench_suite="", seed=5, import_timeout_s=120.0, check_timeout_s=180.0)
    spec = str(problem_of(twin)) + options
    return Evaluator(spec, device="interpret", gpu=PROFILES["h200"], config=config).evaluate(folder)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("strict")
    with ThreadPoolExecutor(max(1, min(2, os.cpu_count() or 1))) as pool:
        futures = {key: pool.submit(evaluate, *key, root) for key in EXPECTED}
        return {key: f.result() for key, f in futures.items()}


@pytest.mark.parametrize("key", sorted(EXPECTED), ids=lambda k: k[0] + k[1].replace("?", "_"))
def test_rewrites_into_other_torch_ops_are_rejected_under_strict(verdicts, key):
    status, rule, phrases = EXPECTED[key]
    result = verdicts[key]
    assert (result.status, result.rule) == (status, rule), result.message
    for phrase in phrases:
        assert phrase in result.message
    assert result.ops == ("partial" if "partial" in key[1] else "strict")
    if status != "correct":
        assert result.fitness == 0
