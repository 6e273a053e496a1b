"""`avo bench`: a table or JSON for a real evaluation, and one-line errors (exit 2) for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from avo import gpus
from avo.cli import main

KERNELS = Path(__file__).resolve().parents[1] / "evaluate" / "kernels"


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["bench", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_table_under_the_interpreter(capsys):
    code, out, err = run(capsys, str(KERNELS / "good_gemm"), "--kernel", "gemm", "--device", "interpret",
                         "--suite", "tiny", "--seed", "5")
    assert code == 0, err
    assert "times: interpreter" in out
    for header in ("TFLOPS", "library TFLOPS", "speedup", "correct", "rel err"):
        assert header in out
    assert "130x257x70_fp16" in out and "fitness:" in out and "seed 5" in out


def test_json_for_a_failing_candidate_exits_1(capsys):
    code, out, err = run(capsys, str(KERNELS / "syntax_error" / "kernel.py"), "--kernel", "gemm",
                         "--device", "interpret", "--json")
    assert code == 1
    payload = json.loads(out)
    assert payload["status"] == "compile_error" and payload["task"] == "gemm" and payload["device"] == "interpret"
    assert "kernel.py:6" in payload["message"]


def test_the_wide_suite_is_timed_on_the_gpu(capsys, monkeypatch):
    from avo.commands import bench as command

    from avo.errors import UserError

    h200_present(monkeypatch)
    seen = {}

    class Evaluator:  # records what it was asked for, then stops the command as a user error would
        def __init__(self, kernel, device, gpu, config):
            seen.update(kernel=kernel, device=device, check=config.check_suite, bench=config.bench_suite)
            raise UserError("recorded")

    monkeypatch.setattr("avo.evaluate.harness.Evaluator", Evaluator)
    code, _, err = run(capsys, str(KERNELS / "good_gemm"), "--kernel", "gemm", "--suite", "wide")
    assert code == 2 and "recorded" in err
    assert seen == {"kernel": "gemm", "device": "cuda", "check": "check", "bench": "wide"}
    assert command.SUITE_PLAN["bench"] == ("check", "bench")


def no_gpu(monkeypatch):
    monkeypatch.setattr(gpus, "nvml_device_name", lambda index=0: None)


def h200_present(monkeypatch):
    monkeypatch.setattr(gpus, "nvml_device_name", lambda index=0: "NVIDIA H200")


def write_kernel(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "cand"
    folder.mkdir()
    (folder / "kernel.py").write_text(text)
    return folder


@pytest.mark.parametrize("case, args, phrase", [
    ("missing path", ["does/not/exist", "--kernel", "gemm", "--device", "interpret"], "candidate not found"),
    ("unknown kernel", [str(KERNELS / "good_gemm"), "--kernel", "conv", "--device", "interpret"], "unknown kernel"),
    ("unknown suite", [str(KERNELS / "good_gemm"), "--kernel", "gemm", "--suite", "huge", "--device", "interpret"],
     "unknown suite"),
    ("unknown device", [str(KERNELS / "good_gemm"), "--kernel", "gemm", "--device", "tpu"], "unknown device"),
    ("no --kernel", [str(KERNELS / "good_gemm"), "--device", "interpret"], "--kernel"),
    ("no entry", None, "defines no `attention`"),
    ("folder without kernel.py", None, "no kernel.py"),
    ("no GPU", [str(KERNELS / "good_gemm"), "--kernel", "gemm"], "--device interpret"),
    ("other GPU", [str(KERNELS / "good_gemm"), "--kernel", "gemm", "--gpu", "b200"], "--gpu b200"),
])
def test_bad_input_is_one_line_exit_2(capsys, monkeypatch, tmp_path, case, args, phrase):
    if case == "no entry":
        args = [str(write_kernel(tmp_path, "def gemm(a, b):\n    return a\n")), "--kernel", "attention",
                "--device", "interpret"]
    if case == "folder without kernel.py":
        (tmp_path / "empty").mkdir()
        args = [str(tmp_path / "empty"), "--kernel", "gemm", "--device", "interpret"]
    if case == "no GPU":
        no_gpu(monkeypatch)
    if case == "other GPU":
        h200_present(monkeypatch)
    code, out, err = run(capsys, *args)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("avo: error:") and phrase in lines[0], err
    assert "Traceback" not in err + out


def test_gpu_table_shows_each_speedup_with_its_error_and_rounds_and_the_fitness_error(capsys, tmp_path):
    from avo.commands.bench import render
    from avo.evaluate.result import CaseResult, EvalResult

    cases = [CaseResult(case=f"c{i}", suite="bench", correct=True, ms=1.0, library_ms=1.1, speedup=1.1,
                        speedup_error=e, rounds=r, host_us=h, library_host_us=lh, launch_shield_us=s)
             for i, (e, r, h, lh, s) in enumerate([(0.002, 3, 112.4, 27.6, 206.0), (0.006, 5, None, None, None)])]
    result = EvalResult(status="correct", cases=cases, fitness=1.1, device="cuda", gpu="h200", library="cudnn")
    assert result.fitness_error() == pytest.approx((0.002**2 + 0.006**2) ** 0.5 / 2)
    render(result, tmp_path, "attention", "bench")
    out = capsys.readouterr().out
    assert "1.100 ±0.2%" in out and "1.100 ±0.6%" in out and "rounds" in out
    assert "112/28/206" in out and "host µs:" in out  # host time per call, the library's, the launch shield
    assert "fitness: 1.1000 ±0.32% (standard error)" in out
    cases[1].speedup_error = None  # a result from before the errors were recorded
    assert result.fitness_error() is None
