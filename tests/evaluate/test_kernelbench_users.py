"""Real KernelBench problems (examples/kernelbench/problems/, from the public repository) with ModelNews written the way
its users write them: Model's nn layers kept in `__init__` as parameter holders, read in a Triton kernel. Each
passes under the interpreter; cheating twins (the holder called in forward; called through an alias) are rejected
under ops=strict, and the first is allowed under `--ops partial`. An imprecise twin (TF32 operands, truncated as the
H200 does) fails the check suite's scaled inputs, where before only a timed call's output showed it."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from avo.cli import main
from avo.config import EvalConfig
from avo.evaluate.harness import Evaluator
from avo.gpus import PROFILES

pytestmark = pytest.mark.usefixtures("private_cache")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kernelbench"
PROBLEMS = EXAMPLES / "problems"
SOLUTIONS = EXAMPLES / "solutions"
CHEATS = Path(__file__).parent / "kb_cheats"
STEMS = sorted(p.stem for p in PROBLEMS.glob("*.py"))

# (folder, problem stem, spec options) -> (status, rule, phrase the message must hold)
EXPECTED = {
    ("12_Gemm_Multiply_LeakyReLU_layer_called", "12_Gemm_Multiply_LeakyReLU", ""):
        ("rejected", "static.library_call", "kernel.py:29 calls self.gemm, a torch.nn.Linear"),
    ("40_LayerNorm_aliased", "40_LayerNorm", ""): ("rejected", "runtime.library_op", "aten.native_layer_norm"),
    ("9_Matmul_Subtract_Multiply_ReLU_tf32", "9_Matmul_Subtract_Multiply_ReLU", ""):
        ("incorrect", "check.mismatch", "(inputs scaled by 2): relative error"),
}


def evaluate(source: Path, stem: str, options: str, root: Path):
    folder = root / f"{source.name}{options.replace('?', '_').replace('=', '_')}"
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("__pycache__"))
    config = EvalConfig(check_suite="tiny", bench_suite="", seed=11, import_timeout_s=120.0, check_timeout_s=180.0)
    spec = str(PROBLEMS / f"{stem}.py") + options
    return Evaluator(spec, device="interpret", gpu=PROFILES["h200"], config=config).evaluate(folder)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("users")
    with ThreadPoolExecutor(max(1, min(2, os.cpu_count() or 1))) as pool:
        futures = {key: pool.submit(evaluate, CHEATS / key[0], key[1], key[2], root) for key in EXPECTED}
        return {key: f.result() for key, f in futures.items()}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """`avo bench --kernel DIR --candidates SOLUTIONS` over the six problems, one that fails to import and one
    without a solution."""
    folder = tmp_path_factory.mktemp("problems")
    for problem in PROBLEMS.glob("*.py"):
        shutil.copy(problem, folder / problem.name)
    (folder / "7_Broken.py").write_text("import torch\nraise RuntimeError('broken on purpose')\n")
    shutil.copy(PROBLEMS / "25_Swish.py", folder / "30_Unsolved.py")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["bench", "--kernel", str(folder), "--candidates", str(SOLUTIONS), "--device", "interpret",
                     "--suite", "tiny", "--seed", "11", "--json"])
    return code, json.loads(out.getvalue()), err.getvalue()


def test_six_problems_from_both_levels():
    assert len(STEMS) == 6
    assert all((SOLUTIONS / stem / "kernel.py").is_file() for stem in STEMS)


def test_the_folder_sweep_scores_every_problem_and_keeps_going(sweep):
    code, data, progress = sweep
    rows = {r["problem"]: r for r in data["rows"]}
    assert list(rows) == ["1_Square_matrix_multiplication_", "7_Broken", "9_Matmul_Subtract_Multiply_ReLU",
                          "12_Gemm_Multiply_LeakyReLU", "23_Softmax", "25_Swish", "30_Unsolved", "40_LayerNorm"]
    for stem in STEMS:
        assert (rows[stem]["status"], rows[stem]["correct"]) == ("correct", True), rows[stem]["reason"]
        assert rows[stem]["fitness"] > 0 and rows[stem]["extra"] == {"timing_source": "interpreter", "ops": "strict",
                                                                 "library_precision": "fp32"}
        assert rows[stem]["evals"]["eager"]["status"] == "correct" and rows[stem]["evals"]["eager"]["cases"]
    assert rows["7_Broken"]["status"] == "load_error" and rows["7_Broken"]["evals"] == {}
    assert "importing it failed: RuntimeError: broken on purpose" in rows["7_Broken"]["reason"]
    assert rows["30_Unsolved"]["status"] == "missing"
    assert "30_Unsolved/kernel.py does not exist" in rows["30_Unsolved"]["reason"]
    assert code == 1  # not every problem is correct
    assert (data["problems"], data["correct"], data["clock"]) == (8, 6, "interpreter (wall clock, not GPU performance)")
    faster = {p: round(sum(r["correct"] and r["fitness"] > float(p) for r in data["rows"]) / 8, 4)
              for p in ("1", "1.5", "2")}
    assert data["fast_p"] == {"0": 0.75, **faster} and "fast_p_compile" not in data
    assert "[8/8] 40_LayerNorm: correct" in progress


@pytest.mark.parametrize("key", sorted(EXPECTED), ids=lambda k: f"{k[0]}{k[2]}")
def test_cheating_twins(verdicts, key):
    status, rule, phrase = EXPECTED[key]
    result = verdicts[key]
    assert (result.status, result.rule) == (status, rule), result.message
    assert phrase in result.message
    assert result.ops == "strict"


def test_the_check_suite_spans_the_timed_inputs_scales(verdicts):
    """Case 0 as drawn, then the top and bottom of the range timed calls' inputs are scaled over (0.5 to 2)."""
    result = verdicts[("9_Matmul_Subtract_Multiply_ReLU_tf32", "9_Matmul_Subtract_Multiply_ReLU", "")]
    assert [c.input_scale for c in result.cases] == [1.0, 2.0, 0.5]
    # As drawn (seed 11) no output passes the threshold: zeros against zeros, error 0, the check the GPU run had.
    assert [c.correct for c in result.cases] == [True, False, True] and result.cases[0].rel_err == 0.0


def test_the_layer_called_twin_passes_under_ops_partial_and_says_so(capsys):
    twin = CHEATS / "12_Gemm_Multiply_LeakyReLU_layer_called"
    code = main(["bench", str(twin), "--kernel", str(PROBLEMS / "12_Gemm_Multiply_LeakyReLU.py"), "--ops", "partial",
                 "--device", "interpret", "--suite", "check", "--seed", "3", "--json"])
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert code == 0, result["message"]
    assert (result["status"], result["ops"]) == ("correct", "partial")


@pytest.mark.parametrize("args, phrase", [
    (["--kernel", "gemm", "--ops", "partial"], "--ops applies to KernelBench-format .py tasks only"),
    (["--kernel", str(PROBLEMS / "25_Swish.py"), "--ops", "lax"], "unknown task option 'ops=lax'"),
])
def test_a_bad_ops_flag_is_one_line(capsys, args, phrase):
    code = main(["bench", str(SOLUTIONS / "25_Swish"), *args, "--device", "interpret"])
    out, err = capsys.readouterr()
    assert code == 2 and phrase in err and err.count("\n") == 1


def gpu_check(folder: Path, stem: str):
    config = EvalConfig(check_suite="check", bench_suite="", seed=11)
    return Evaluator(str(PROBLEMS / f"{stem}.py"), device="cuda", gpu=PROFILES["h200"], config=config).evaluate(folder)


@pytest.mark.gpu
@pytest.mark.parametrize("stem", ["9_Matmul_Subtract_Multiply_ReLU", "40_LayerNorm"])
def test_the_solutions_that_failed_on_the_h200_pass_its_check_suite(stem):
    result = gpu_check(SOLUTIONS / stem, stem)
    assert result.status == "correct", result.message


@pytest.mark.gpu
def test_the_tf32_dot_fails_the_gpu_check_suite_at_scale_2(tmp_path):
    stem = "9_Matmul_Subtract_Multiply_ReLU"
    folder = tmp_path / "tf32"
    shutil.copytree(SOLUTIONS / stem, folder, ignore=shutil.ignore_patterns("__pycache__"))
    kernel = folder / "kernel.py"
    text = kernel.read_text()
    assert 'PRECISION = "tf32x3"' in text
    kernel.write_text(text.replace('PRECISION = "tf32x3"', 'PRECISION = "tf32"'))
    result = gpu_check(folder, stem)
    assert (result.status, result.rule) == ("incorrect", "check.mismatch"), result.message
    assert "(inputs scaled by 2)" in result.message
