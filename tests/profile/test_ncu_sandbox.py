"""`avo profile`, `avo inspect` and the agent's profile tools by the evaluations' sandbox policy: counters refused
inside the sandbox said so in one line, `on` without a sandbox refused, the driver's counter setting read for
`avo doctor`, and the runs folder out of a candidate's sight unless the sandbox is off. (The attacks themselves:
tests/evaluate/sandbox/test_profile_attacks.py.)"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import needs
from avo.agent.tools.base import ToolContext, ToolError
from avo.agent.tools.profile import InspectArgs, inspect_compile
from avo.commands import doctor
from avo.config import RunConfig
from avo.errors import UserError
from avo.evaluate import sandbox as sandbox_module
from avo.profile import ProfileError, ncu
from avo.profile.compiler import inspect_candidate
from avo.profile.ncu import PERMISSION_HELP, counters_restricted, profile_candidate
from test_ncu_run import H200, PERMISSION_TEXT, SEED, fake_ncu

ROOT = Path(__file__).parents[2]
PEEKS = """\
# inspect compiles the triton kernels a kernel.py launches; this one only says what it sees
import os
raise RuntimeError(f"sees the runs: {os.path.isdir(@RUNS@)}")
"""


@pytest.fixture
def peeking(tmp_path):
    """A runs folder holding a run, and a candidate outside it that reports whether it can see that run."""
    runs = tmp_path / "runs"
    (runs / "r1").mkdir(parents=True)
    folder = tmp_path / "cand"
    folder.mkdir()
    (folder / "kernel.py").write_text(PEEKS.replace("@RUNS@", repr(str(runs / "r1"))))
    return runs, folder


@needs.bwrap
def test_counters_refused_inside_the_sandbox_say_so_and_how_to_allow_them(tmp_path):
    refusing = fake_ncu(tmp_path, f"print({PERMISSION_TEXT!r}); sys.exit(1)\n")
    with pytest.raises(ProfileError) as info:
        profile_candidate(SEED, "gemm", gpu=H200, ncu=refusing, sandbox="on")
    message = str(info.value)
    assert "\n" not in message and "inside the sandbox" in message and "ERR_NVGPUCTRPERM" in message
    assert "NVreg_RestrictProfilingToAdminUsers=0" in message and "--no-sandbox" in message
    assert "evaluation.sandbox: off" in message


def test_unconfined_a_counter_refusal_is_the_drivers_own(tmp_path):
    refusing = fake_ncu(tmp_path, f"print({PERMISSION_TEXT!r}); sys.exit(1)\n")
    with pytest.raises(ProfileError) as info:
        profile_candidate(SEED, "gemm", gpu=H200, ncu=refusing, sandbox="off")
    assert str(info.value) == PERMISSION_HELP


def test_sandbox_on_without_one_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv(sandbox_module.ENV_VAR, str(tmp_path / "missing-bwrap"))
    never = fake_ncu(tmp_path, "open('ran', 'w'); sys.exit(0)\n")
    for run in (lambda: profile_candidate(SEED, "gemm", gpu=H200, ncu=never, sandbox="on"),
                lambda: inspect_candidate(SEED, "gemm", gpu=H200, sandbox="on")):
        with pytest.raises(UserError, match="the sandbox is required but") as info:
            run()
        assert "\n" not in str(info.value)


def test_counter_restriction_is_read_from_the_drivers_parameters(tmp_path):
    params = tmp_path / "params"
    params.write_text("ResmanDebugLevel: 4294967295\nRestrictProfilingToAdminUsers: 1\nEnableMSI: 1\n")
    assert counters_restricted(params) is True
    params.write_text("RestrictProfilingToAdminUsers: 0\n")
    assert counters_restricted(params) is False
    params.write_text("EnableMSI: 1\n")
    assert counters_restricted(params) is None
    assert counters_restricted(tmp_path / "no-driver") is None


def test_doctor_says_whether_a_sandboxed_ncu_may_read_counters(tmp_path, monkeypatch):
    params = tmp_path / "params"
    monkeypatch.setattr(ncu, "DRIVER_PARAMS", params)
    assert doctor.check_counters() == []  # no driver: nothing to say
    params.write_text("RestrictProfilingToAdminUsers: 1\n")
    [check] = doctor.check_counters()
    assert not check.ok and "sandbox" in check.detail and "NVreg_RestrictProfilingToAdminUsers=0" in check.fix
    params.write_text("RestrictProfilingToAdminUsers: 0\n")
    [check] = doctor.check_counters()
    assert check.ok and "inside the sandbox" in check.detail


@needs.bwrap
@pytest.mark.parametrize("no_sandbox", [False, True])
def test_avo_inspect_masks_the_runs_folder_unless_the_sandbox_is_off(peeking, no_sandbox):
    runs, folder = peeking
    cmd = [sys.executable, "-m", "avo", "inspect", str(folder), "--kernel", "gemm", "--runs-dir", str(runs)]
    done = subprocess.run(cmd + (["--no-sandbox"] if no_sandbox else []), capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    assert f"sees the runs: {no_sandbox}" in done.stderr and done.stderr.count("\n") == 1, done.stderr


@needs.bwrap
@pytest.mark.parametrize("mode", ["on", "off"])
def test_the_agents_inspect_tool_follows_the_runs_sandbox_policy(peeking, mode):
    runs, folder = peeking
    config = RunConfig(evaluation={"sandbox": mode}, runs_dir=str(runs))
    ctx = ToolContext(workspace=folder, task_spec="gemm", device="interpret", gpu=H200, config=config)
    with pytest.raises(ToolError, match=f"sees the runs: {mode == 'off'}") as info:
        inspect_compile(ctx, InspectArgs())
    assert "kernel.py:3 in <module>" in str(info.value)  # the traceback, which the one-line error leaves out


@needs.bwrap
def test_a_kernelbench_task_named_relative_to_here_is_read_inside_the_sandbox(tmp_path, monkeypatch):
    """The capture runs in a scratch folder of its own, where the task file's folder is bound read-only: the spec
    reaches it as an absolute path."""
    problems = ROOT / "tests" / "tasks" / "kernelbench" / "kb_problems"
    (tmp_path / "task").mkdir()
    shutil.copy(problems / "layer_norm.py", tmp_path / "task" / "layer_norm.py")
    candidate = shutil.copytree(problems / "candidates" / "layer_norm_honest", tmp_path / "cand")
    monkeypatch.chdir(tmp_path)
    report = inspect_candidate(candidate, "task/layer_norm.py", gpu=H200, sandbox="on")
    assert [k["name"] for k in report.data["kernels"]] == ["_layer_norm_rows"]


@needs.bwrap
@pytest.mark.parametrize("mode", ["on", "off"])
def test_sandboxed_the_capture_compiles_into_caches_of_its_own(tmp_path, monkeypatch, mode):
    """As an evaluation worker's: no kernel binary a candidate compiled is left in a cache another one loads."""
    shared = tmp_path / "shared-cache"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(shared))
    (tmp_path / "cand").mkdir()
    (tmp_path / "cand" / "kernel.py").write_text("# triton\nimport os\n"
                                                 "raise RuntimeError('cache ' + os.environ['TRITON_CACHE_DIR'])\n")
    with pytest.raises(ProfileError, match="cache ") as info:
        inspect_candidate(tmp_path / "cand", "gemm", gpu=H200, sandbox=mode)
    cache = str(info.value).rpartition("cache ")[2]
    if mode == "on":
        assert Path(cache).parent.name == "cache" and Path(cache).parents[1].name.startswith("avo-inspect-")
    else:
        assert cache == str(shared)
