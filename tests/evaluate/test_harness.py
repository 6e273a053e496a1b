"""The evaluator end to end, on the CPU: real tiny Triton kernels under the interpreter, each in a child process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from avo.util import procs
from avo.config import EvalConfig
from avo.evaluate.harness import Evaluator, scrubbed_env
from avo.gpus import PROFILES

KERNELS = Path(__file__).parent / "kernels"
H200 = PROFILES["h200"]


def evaluator(**overrides) -> Evaluator:
    """Check-only on the tiny suite unless told otherwise: timing is tested once, it costs interpreter time."""
    settings = {"check_suite": "tiny", "bench_suite": "", "seed": 11} | overrides
    return Evaluator("gemm", device="interpret", gpu=H200, config=EvalConfig(**settings))


@pytest.fixture(scope="module")
def good_timed():
    return evaluator(bench_suite="bench").evaluate(KERNELS / "good_gemm")


def test_good_kernel_is_correct_with_interpreter_timing(good_timed):
    r = good_timed
    assert r.status == "correct", r.message
    assert r.timing_source == "interpreter" and r.device == "interpret"
    assert r.seed == 11 and r.versions["torch"] and r.versions["triton"]
    assert r.library == "torch.matmul (cpu)"
    tiny = [c for c in r.cases if c.suite == "tiny"]
    assert len(tiny) == 4 and all(c.correct for c in tiny)
    assert all(c.rel_err < c.tolerance for c in tiny)
    assert all(c.ms > 0 and c.library_ms > 0 and c.speedup == pytest.approx(c.library_ms / c.ms) for c in tiny)
    assert r.fitness > 0
    assert set(r.stage_s) >= {"startup", "setup", "static", "import", "check", "bench", "bench.timing", "bench.verify"}
    parts = sum(v for k, v in r.stage_s.items() if k.startswith("bench."))
    assert parts <= r.stage_s["bench"] + 0.01  # the parts account for the bench stage, never more


def test_wrong_kernel_is_incorrect_with_its_error():
    r = evaluator().evaluate(KERNELS / "wrong_gemm")
    assert r.status == "incorrect" and r.rule == "check.mismatch"
    assert "1x1x1_fp16" in r.message and "relative error" in r.message and "0.002" in r.message
    failed = [c for c in r.cases if not c.correct]
    assert failed and all(c.rel_err > c.tolerance for c in failed)
    assert r.fitness == 0


def test_syntax_error_is_compile_error_naming_the_line():
    r = evaluator().evaluate(KERNELS / "syntax_error")
    assert r.status == "compile_error" and r.rule == "compile"
    assert "kernel.py:6" in r.message and "def gemm(a, b)" in r.message


def test_unwritten_output_is_caught():
    r = evaluator().evaluate(KERNELS / "unwritten")
    assert r.status == "incorrect" and r.rule == "check.unwritten"
    assert "never written" in r.message


def test_abort_is_a_crash_and_names_the_signal():
    r = evaluator().evaluate(KERNELS / "aborts")
    assert r.status == "crash" and r.rule == "crash"
    assert "SIGABRT" in r.message and "1x1x1_fp16" in r.message


def test_a_worker_that_exits_before_its_first_stage_reports_its_stderr_tail(tmp_path):
    """As on the H200, where building a problem's models raised before any stage: exit code 1, no result. The crash
    carries the exception from the worker's stderr, and a sweep row names it in its one line."""
    from avo.tasks.kernelbench import sweep

    spec = str(tmp_path / "gone.py")  # the worker, not the parent, finds the task file missing
    r = Evaluator(spec, device="interpret", gpu=H200, config=EvalConfig(check_suite="tiny", bench_suite="",
                                                                          seed=11)).evaluate(KERNELS / "good_gemm")
    assert (r.status, r.rule) == ("crash", "crash")
    assert "exited with code 1 without a result during stage start" in r.message
    assert "--- stderr (tail) ---" in r.message and "Traceback" in r.message
    row = sweep.row_of("gone", r, timed=False)
    assert row.reason.endswith(f"UserError: task file not found: {spec}"), row.reason
    assert row.message == r.message


def test_a_segfault_is_a_crash_and_the_next_evaluation_is_normal():
    """The wild store that is a CUDA illegal address on a GPU (test_faults_gpu.py) is a SIGSEGV under the
    interpreter: the worker dies of it, and the next evaluation runs in a fresh one."""
    ev = evaluator()
    r = ev.evaluate(KERNELS / "illegal_address")
    assert r.status == "crash" and r.rule == "crash" and "was killed by SIGSEGV" in r.message, r.message
    assert ev.evaluate(KERNELS / "good_gemm").status == "correct"


def test_endless_loop_times_out_within_its_limit_and_the_next_evaluation_works():
    # The worker is set up before the candidate is handed to it, so the limit runs from the request: it is the
    # kernel's, not the start-up's, however slow the machine is to start a process.
    limit = 6.0
    settings = {"check_suite": "tiny", "bench_suite": "", "seed": 11, "import_timeout_s": limit,
                "check_timeout_s": limit}
    ev = Evaluator("gemm", device="interpret", gpu=H200, config=EvalConfig(**settings), prewarm=True)
    try:
        ev.warm()
        assert ev._spares[0].ready(120), "the worker never finished its set-up"
        r = ev.evaluate(KERNELS / "endless_loop")  # it never returns on its own: only the limit can end it
        assert r.status == "timeout" and r.rule == "stage.import"
        assert "stage compile" in r.message, "the limit must be hit while the kernel runs, not while starting up"
        assert ev._spares[0].ready(120)
        assert ev.evaluate(KERNELS / "good_gemm").status == "correct"
    finally:
        ev.close()


def test_candidate_cannot_see_api_keys(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/home/user/service-account.json")
    monkeypatch.setenv("AVO_PROBE_AUTH", "basic dXNlcjpwYXNz")
    monkeypatch.setenv("AVO_PROBE_VISIBLE", "1")
    r = evaluator().evaluate(KERNELS / "env_probe")
    assert r.status == "correct", r.message


def test_scrubbed_env_drops_secrets_and_sets_the_interpreter(monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "AWS_REGION", "HF_HOME", "GITHUB_TOKEN", "DB_PASSWORD",
                 "MY_SECRET", "some_key"):
        monkeypatch.setenv(name, "x")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    env = scrubbed_env("interpret")
    assert not {"ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "AWS_REGION", "HF_HOME", "GITHUB_TOKEN", "DB_PASSWORD",
                "MY_SECRET", "some_key"} & set(env)
    assert env["TRITON_INTERPRET"] == "1" and env["PATH"] == os.environ["PATH"]
    assert "TRITON_INTERPRET" not in scrubbed_env("cuda")


def test_inductor_compiles_on_the_workers_own_thread(monkeypatch):
    """With a compile pool, Inductor (torch.compile, a KernelBench baseline) starts threads whenever results arrive,
    and the Sentinel takes them for the candidate's (the GPU test of the compile baseline caught that on the H200)."""
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "8")
    assert scrubbed_env("cuda")["TORCHINDUCTOR_COMPILE_THREADS"] == "1"


def test_confirm_times_both_in_one_child(tmp_path):
    incumbent = tmp_path / "incumbent"
    shutil.copytree(KERNELS / "good_gemm", incumbent)
    first, second = evaluator(bench_suite="bench").confirm(KERNELS / "good_gemm", incumbent)
    for r in (first, second):
        assert r.status == "correct", r.message
        assert r.timing_source == "interpreter" and r.fitness > 0
    assert first.seed == second.seed
    # one library measurement serves both: they were timed side by side
    assert [c.library_ms for c in first.bench_cases()] == [c.library_ms for c in second.bench_cases()]


def test_confirm_reports_each_candidate_on_its_own():
    first, second = evaluator().confirm(KERNELS / "wrong_gemm", KERNELS / "good_gemm")
    assert first.status == "incorrect" and first.rule == "check.mismatch"
    assert second.status == "correct", second.message


@pytest.mark.parametrize("channel", [
    b'ready\n{"results": [{"status": "correct", "fitness": 99.0}]}\n',  # unsigned
    b'{"results": [{"status": "correct", "fitness": 99.0}]}\nready\n',  # before the worker was done
    b'ready\n{"token": "x", "results": []}\n{"token": "x", "results": []}\n',  # two results
])
def test_a_result_the_worker_did_not_sign_is_refused(channel):
    """The worker signs its one result with a token the parent sends only once it says `ready` on the channel."""
    ev = evaluator()
    worker = ev._new_worker()
    try:
        procs.kill_group(worker.proc)
        worker._channel += channel
        worker.progress_path.write_text("check\t1x1x1\t0\n")
        [r] = ev._collect(worker, None, 1)
    finally:
        worker.discard()
    assert (r.status, r.rule) == ("rejected", "runtime.file_access") and r.fitness == 0
    assert "forged" in r.message


def test_planted_bytecode_is_never_run(tmp_path):
    """A __pycache__/*.pyc whose header matches kernel.py would be run instead of the source the guards read."""
    import importlib._bootstrap_external as bytecode

    folder = tmp_path / "planted"
    shutil.copytree(KERNELS / "good_gemm", folder)
    source = folder / "kernel.py"
    cheat = compile("import torch\n\ndef gemm(a, b):\n    return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype)\n",
                    str(source), "exec")
    stat = source.stat()
    pyc = folder / "__pycache__" / f"kernel.{sys.implementation.cache_tag}.pyc"
    pyc.parent.mkdir()
    pyc.write_bytes(bytecode._code_to_timestamp_pyc(cheat, stat.st_mtime, stat.st_size))
    plain = subprocess.run([sys.executable, "-c", "import kernel; print(kernel.gemm.__code__.co_names)"], cwd=folder,
                           capture_output=True, text=True)
    assert "zeros" in plain.stdout, "a plain import should pick up the planted bytecode"
    r = evaluator().evaluate(folder)
    assert r.status == "correct", r.message


def test_the_candidates_bytecode_never_lands_in_its_folder(tmp_path):
    """The worker writes bytecode (so torch's modules are not recompiled per evaluation), but the candidate's own
    goes to a throwaway folder: nothing the lineage would commit, nothing a later evaluation could read."""
    folder = tmp_path / "clean"
    shutil.copytree(KERNELS / "good_gemm", folder, ignore=shutil.ignore_patterns("__pycache__"))
    r = evaluator().evaluate(folder)
    assert r.status == "correct", r.message
    assert not list(folder.rglob("*.pyc"))




def test_the_harness_is_an_evaluator():
    import avo.evaluate

    assert isinstance(Evaluator("gemm", device="interpret", gpu=PROFILES["h200"]), avo.evaluate.Evaluator)
