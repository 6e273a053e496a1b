"""When the sandbox is used, what it hides, and the parent's refusal of physically impossible GPU results."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from avo import tasks
from avo.agent.session import settle_sandbox
from avo.commands import doctor
from avo.config import RunConfig
from avo.errors import UserError
from avo.evaluate.plausible import impossible
from avo.evaluate.result import CaseResult, EvalResult
from avo.gpus import PROFILES
from avo.evaluate import sandbox
from avo.util import shipped
import needs


@pytest.fixture
def no_bwrap(monkeypatch, tmp_path):
    monkeypatch.setenv(sandbox.ENV_VAR, str(tmp_path / "missing-bwrap"))


@pytest.mark.parametrize("agent", ["anthropic", "openai"])
def test_an_llm_agents_run_refuses_to_start_without_a_sandbox(no_bwrap, agent):
    config = RunConfig(agent={"kind": agent})
    with pytest.raises(UserError, match="--no-sandbox") as caught:
        settle_sandbox(config, lambda line: None)
    assert "\n" not in str(caught.value) and "bwrap" in str(caught.value)


def test_no_sandbox_is_explicit_and_recorded(no_bwrap):
    config, said = RunConfig(agent={"kind": "openai"}, evaluation={"sandbox": "off"}), []
    settle_sandbox(config, said.append)
    assert config.evaluation.sandbox == "off" and "unconfined" in said[0]
    assert config.model_dump(mode="json")["evaluation"]["sandbox"] == "off"  # what run.json stores


def test_the_heuristic_agent_runs_on_with_a_warning(no_bwrap):
    config, said = RunConfig(agent={"kind": "heuristic"}), []
    settle_sandbox(config, said.append)
    assert config.evaluation.sandbox == "off" and said[0].startswith("warning: no sandbox")


def test_sandbox_on_is_refused_without_one_even_for_the_heuristic(no_bwrap):
    with pytest.raises(UserError, match="AVO_BWRAP"):
        settle_sandbox(RunConfig(agent={"kind": "heuristic"}, evaluation={"sandbox": "on"}), lambda line: None)


def test_doctor_says_how_to_install_the_sandbox(no_bwrap):
    check = doctor.check_sandbox()
    assert not check.ok and "apt-get install bubblewrap" in check.fix and sandbox.ENV_VAR in check.fix


@needs.bwrap
def test_a_run_records_that_it_was_sandboxed():
    config = RunConfig(agent={"kind": "openai"})
    settle_sandbox(config, lambda line: None)
    assert config.evaluation.sandbox == "on"


@needs.bwrap
def test_the_sandbox_masks_the_home_and_runs_folders_but_not_python(tmp_path, monkeypatch):
    home, runs, box = tmp_path / "home", tmp_path / "elsewhere" / "runs", tmp_path / "box"
    for folder in (home, runs, box):
        folder.mkdir(parents=True)
    (home / "secret").write_text("s")
    (runs / "notes.md").write_text("n")
    monkeypatch.setenv("HOME", str(home))
    script = (f"ls -A {home} {runs}; echo x > {box}/made; echo y > {runs}/planted || echo refused; "
              "python -c 'import avo, torch; print(\"imports\")'; ls /proc | grep -c '^[0-9]'")
    cmd = sandbox.command(["sh", "-c", script], writable=[box], cwd=box, hide=[runs])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    assert "secret" not in out and "notes.md" not in out and "imports" in out
    assert (box / "made").exists() and not (runs / "planted").exists()
    assert int(out.split()[-1]) <= 4  # bwrap, sh and what sh runs: no process of avo's or this machine's


@needs.bwrap
def test_sandboxes_started_in_different_folders_see_one_working_directory(tmp_path):
    """Every evaluation worker starts in the same path (what cuDNN's runtime-compiled kernels embed of it), and what
    it writes there lands in its own folder."""
    seen = []
    for name in ("first", "second"):
        box = tmp_path / name
        box.mkdir()
        cmd = sandbox.command(["sh", "-c", f"pwd; echo {name} > made"], writable=[box], cwd=box,
                              cwd_as="/tmp/avo-work")
        seen.append(subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip())
        assert (box / "made").read_text().strip() == name
    assert seen == ["/tmp/avo-work", "/tmp/avo-work"]
    with pytest.raises(ValueError, match="/tmp"):
        sandbox.command(["true"], writable=[tmp_path], cwd=tmp_path, cwd_as="/usr/work")


def _gemm_result(ms: float) -> EvalResult:
    case = tasks.load("gemm").cases("bench")[0]  # 4096^3: 137 GFLOP, 100 MB
    return EvalResult(status="correct", fitness=2.0, timing_source="gpu",
                      cases=[CaseResult(case=case.name, suite="bench", correct=True, ms=ms, library_ms=1.0,
                                        speedup=1.0 / ms)])


def test_a_gpu_result_faster_than_the_gpu_can_be_is_impossible():
    gemm, h200 = tasks.load("gemm"), PROFILES["h200"]
    assert impossible(_gemm_result(0.16), gemm, h200, "bench") is None  # ~860 TFLOPS: fast, possible
    why = impossible(_gemm_result(0.01), gemm, h200, "bench")  # ~13,700 TFLOPS
    assert why is not None and "TFLOPS" in why and "h200" in why


def test_bandwidth_bounds_only_data_that_cannot_sit_in_l2():
    gemm, h200 = tasks.load("gemm"), PROFILES["h200"]
    slow_gpu = h200.model_copy(update={"peak_fp8_tflops": 1e9, "peak_bf16_tflops": 1e9, "peak_fp16_tflops": 1e9})
    assert "GB/s" in impossible(_gemm_result(0.01), gemm, slow_gpu, "bench")  # 100 MB in 10 us
    big_l2 = slow_gpu.model_copy(update={"l2_mb": 1024})
    assert impossible(_gemm_result(0.01), gemm, big_l2, "bench") is None


def test_interpreter_timings_are_never_judged_against_the_gpu():
    result = _gemm_result(0.0001).model_copy(update={"timing_source": "interpreter"})
    assert impossible(result, tasks.load("gemm"), PROFILES["h200"], "bench") is None


def test_the_parent_rejects_an_impossible_result_the_worker_sent():
    """Whatever the worker's process reports, the parent checks it against the GPU's peak itself."""
    from avo.config import EvalConfig
    from avo.evaluate.harness import Evaluator
    from avo.util import procs

    ev = Evaluator("gemm", device="cuda", gpu=PROFILES["h200"], config=EvalConfig(sandbox="off"))
    worker = ev._new_worker()
    try:
        procs.kill_group(worker.proc)
        sent = {"token": worker.token, "results": [_gemm_result(0.01).model_dump(mode="json")]}
        worker._channel += b"ready\n" + json.dumps(sent).encode() + b"\n"
        [r] = ev._collect(worker, None, 1)
    finally:
        worker.discard()
    assert (r.status, r.rule, r.fitness) == ("rejected", "plausibility.peak", 0.0) and "TFLOPS" in r.message


@needs.bwrap
def test_a_checkout_under_a_masked_folder_is_readable_but_its_runs_folder_is_not(tmp_path, monkeypatch):
    """A clone in the home folder (or /tmp) holding the runs folder, as `avo inspect` in a fresh checkout hides its
    default `runs`: the checkout is bound back, its runs folder masked again on top of it, and a candidate folder
    inside the runs folder that is named readable stays readable."""
    home = tmp_path / "home"
    checkout, box = home / "repo", tmp_path / "box"
    runs, candidate = checkout / "runs", checkout / "runs" / "r1" / "cand"
    for folder in (candidate, box):
        folder.mkdir(parents=True)
    (checkout / "code.py").write_text("c")
    (runs / "r1" / "notes.md").write_text("n")
    (candidate / "kernel.py").write_text("k")
    monkeypatch.setenv("HOME", str(home))
    script = (f"cat {checkout}/code.py {candidate}/kernel.py; echo; ls -A {runs} {runs}/r1; "
              f"python -c 'import avo; print(\"imports\")'")
    cmd = sandbox.command(["sh", "-c", script], writable=[box], cwd=box, hide=[runs], readable=[checkout, candidate])
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.stdout.startswith("ck"), done.stdout + done.stderr
    assert "notes.md" not in done.stdout and "imports" in done.stdout


@needs.bwrap
def test_a_masked_folder_on_the_import_path_stays_masked_and_a_task_file_is_shown_alone(tmp_path, monkeypatch):
    """PYTHONPATH naming the home folder itself, and a task file kept in the home folder: neither shows the home
    folder's other files (a key beside them); the task file is readable, and avo still imports."""
    home, box = tmp_path / "home", tmp_path / "box"
    for folder in (home, box):
        folder.mkdir()
    (home / ".env").write_text("KEY=secret")
    task = home / "problem.py"
    task.write_text("p")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PYTHONPATH", str(home))
    script = f"cat {task}; echo; cat {home}/.env; python -c 'import avo; print(\"imports\")'"
    cmd = sandbox.command(["sh", "-c", script], writable=[box], cwd=box, readable=[task])
    assert ["--ro-bind", str(home), str(home)] not in runs(cmd, 3)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.stdout.startswith("p\n") and "secret" not in done.stdout and "imports" in done.stdout, (
        done.stdout + done.stderr)


@needs.bwrap
def test_the_folder_avo_runs_in_is_masked_outside_the_home_folder_too(tmp_path, monkeypatch):
    """A project folder outside the home folder and /tmp (here under /var/tmp), avo started in it with a key in its
    `.env` and its virtual environment inside it: the sandbox shows neither the key nor the folder's other files,
    and Python, avo and the environment's packages still import."""
    outside = Path("/var/tmp")
    if not (outside.is_dir() and os.access(outside, os.W_OK)):
        pytest.skip("/var/tmp is not writable here")
    project = Path(tempfile.mkdtemp(dir=outside)) / "project"
    try:
        packages = project / ".venv" / "site"
        packages.mkdir(parents=True)
        (packages / "project_dep.py").write_text("NAME = 'dep'\n")
        (project / ".env").write_text("OPENAI_API_KEY=sk-secret\n")
        (project / "notes.md").write_text("n")
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(packages), os.environ.get("PYTHONPATH", "")]))
        monkeypatch.chdir(project)
        box = tmp_path / "box"
        box.mkdir()
        script = (f"cat {project}/.env; ls -A {project}; "
                  "python -c 'import avo, project_dep; print(\"imports\", project_dep.NAME)'")
        cmd = sandbox.command(["sh", "-c", script], writable=[box], cwd=box)
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert "sk-secret" not in done.stdout and "notes.md" not in done.stdout, done.stdout
        assert "imports dep" in done.stdout, done.stdout + done.stderr
    finally:
        shutil.rmtree(project.parent)


@needs.bwrap
def test_avo_started_in_its_own_checkout_shows_its_package_and_nothing_beside_it(tmp_path, monkeypatch):
    """avo's own checkout, where a developer's `.env` may hold a key: avo started there, the sandbox masks the
    checkout and binds back its `avo` package alone (and the virtual environment, if it lies there); avo imports."""
    checkout = own_checkout(monkeypatch)
    monkeypatch.chdir(checkout)
    box = tmp_path / "box"
    box.mkdir()
    script = f"ls -A {checkout}; python -c 'import avo.evaluate.sandbox; print(\"imports\")'"
    cmd = sandbox.command(["sh", "-c", script], writable=[box], cwd=box)
    assert ["--tmpfs", str(checkout)] in runs(cmd, 2)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    shown = set(done.stdout.split())
    assert {"avo", "imports"} <= shown, done.stdout + done.stderr
    assert not {"pyproject.toml", "README.md", "tests", "kernels"} & shown, shown


def own_checkout(monkeypatch) -> Path:
    """avo's checkout, which the test is to start avo in, with PYTHONPATH cleared of it (a path naming it would show
    all of it); the test skips where avo is installed rather than run from one."""
    if not (shipped.CHECKOUT / "pyproject.toml").is_file():
        pytest.skip("avo is installed, not run from a checkout")
    kept = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if p and Path(p).resolve() != shipped.CHECKOUT]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(kept))
    return shipped.CHECKOUT


def runs(cmd: list[str], length: int) -> list[list[str]]:
    """Every run of `length` consecutive arguments of a command line (an option and its operands)."""
    return [cmd[i:i + length] for i in range(len(cmd) - length + 1)]
