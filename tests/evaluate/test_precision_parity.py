"""Precision parity for float32 problems: a candidate whose error is past what fp32 arithmetic gives is timed against
the library with TF32 allowed too and labelled `tf32`; one within fp32's keeps the library as configured (`fp32`);
bf16 arithmetic is past the tolerance, rejected as before. TF32 is simulated on the CPU by rounding the operands to
10 mantissa bits before an fp32 dot (the interpreter's clock: what is tested is the decision and the label; on the
CPU the TF32 flags change nothing for the library)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from avo.config import EvalConfig
from avo.evaluate.harness import Evaluator
from avo.evaluate.worker.precision import FP32_FLOOR, past_fp32
from avo.gpus import PROFILES

pytestmark = pytest.mark.usefixtures("private_cache")

KERNEL = Path(__file__).parent / "kb_precision" / "matmul_rounded"
PROBLEM = KERNEL.parent / "matmul_randn.py"


def rounded(tmp_path: Path, dropped_bits: int) -> Path:
    folder = tmp_path / f"dropped_{dropped_bits}"
    shutil.copytree(KERNEL, folder, ignore=shutil.ignore_patterns("__pycache__"))
    kernel = folder / "kernel.py"
    kernel.write_text(kernel.read_text().replace("DROPPED_BITS = 0\n", f"DROPPED_BITS = {dropped_bits}\n"))
    return folder


def evaluate(folder: Path, device: str = "interpret", **settings):
    defaults = {"check_suite": "tiny", "bench_suite": "tiny", "seed": 5, "import_timeout_s": 120.0,
                "check_timeout_s": 180.0, "bench_timeout_s": 300.0} if device == "interpret" else {"seed": 5}
    config = EvalConfig(**(defaults | settings))
    return Evaluator(str(PROBLEM), device=device, gpu=PROFILES["h200"], config=config).evaluate(folder)


def test_the_bound_is_the_library_error_with_a_margin_and_a_floor():
    assert not past_fp32(3e-7, 2.5e-7) and not past_fp32(FP32_FLOOR, 0.0)
    assert past_fp32(2.9e-4, 2.5e-7)
    assert not past_fp32(2.9e-4, 1e-4)  # a library as imprecise (cuDNN's TF32 default): no relabelling


@pytest.mark.parametrize("dropped, precision", [(0, "fp32"), (13, "tf32")])
def test_float32_candidates_are_compared_at_their_precision(tmp_path, dropped, precision):
    result = evaluate(rounded(tmp_path, dropped))
    assert result.status == "correct", result.message
    assert result.library_precision == precision
    timed = result.bench_cases()
    assert timed and all(c.library_precision == precision and c.library_ms > 0 for c in timed)
    for case in timed:
        assert case.library_rel_err < FP32_FLOOR
        assert (case.rel_err > FP32_FLOOR) == (precision == "tf32")
    assert ("(TF32 allowed)" in result.summary()) == (precision == "tf32")


def test_bf16_arithmetic_is_still_past_the_tolerance(tmp_path):
    result = evaluate(rounded(tmp_path, 16), bench_suite="")
    assert (result.status, result.rule) == ("incorrect", "check.mismatch"), result.message
    assert "exceeds the tolerance 0.001" in result.message and result.library_precision == ""


@pytest.mark.gpu
@pytest.mark.parametrize("dropped, precision", [(0, "fp32"), (13, "tf32")])
def test_the_tf32_library_is_timed_on_the_gpu(tmp_path, dropped, precision):
    result = evaluate(rounded(tmp_path, dropped), device="cuda")
    assert result.status == "correct", result.message
    assert result.library_precision == precision and result.fitness > 0
    assert all(c.library_precision == precision and c.library_ms > 0 for c in result.bench_cases())


def test_avo_bench_shows_which_library_each_case_was_timed_against(tmp_path, capsys):
    from avo.cli import main

    code = main(["bench", str(rounded(tmp_path, 13)), "--kernel", str(PROBLEM), "--device", "interpret",
                 "--suite", "tiny", "--seed", "5"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "library as" in out and "tf32 (TF32 allowed" in out
    assert sum(" tf32 " in line for line in out.splitlines() if "(tiny)" in line) >= 2


def test_the_sweep_table_labels_each_row_with_its_comparison():
    import io

    from avo.evaluate.result import EvalResult
    from avo.tasks.kernelbench import sweep

    rows = [sweep.row_of(name, EvalResult(status="correct", fitness=fitness, library_precision=precision), True)
            for name, fitness, precision in (("12_Gemm", 1.4, "tf32"), ("23_Softmax", 1.1, "fp32"))]
    data = sweep.summary(rows, title="sweep", clock="gpu", compile_asked=False)
    assert [r["extra"]["library_precision"] for r in data["rows"]] == ["tf32", "fp32"]
    out = io.StringIO()
    sweep.render(data, out)
    lines = out.getvalue().splitlines()
    assert any("library as" in line for line in lines)
    assert any("12_Gemm" in line and "tf32" in line for line in lines)
    assert any("23_Softmax" in line and "fp32" in line for line in lines)
