"""Running ncu: the command line, the child's environment, and every way a profile can fail, with stand-in ncu
programs that behave like the real one (real output text, real exit codes)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from avo.gpus import PROFILES
from avo.profile import ProfileError
from avo.profile import driver
from avo.profile.ncu import SECTIONS, child_env, extra_metrics, find_ncu, ncu_command, profile_candidate

FIXTURE = Path(__file__).parent / "fixtures" / "ncu-h200-triton-gemm-details.csv"
SEED = Path(__file__).parent / "tiny_gemm"
H200 = PROFILES["h200"]
PERMISSION_TEXT = ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
                   "Counters on the target device 0. For instructions on enabling permissions and to get more "
                   "information see https://developer.nvidia.com/ERR_NVGPUCTRPERM")


def fake_ncu(tmp_path: Path, body: str) -> str:
    """An executable standing in for ncu; `log` and `status` are the paths ncu and the driver would write."""
    script = tmp_path / "ncu"
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent("""\
        import json, sys, time
        args = sys.argv[1:]
        log = args[args.index("--log-file") + 1]
        status = args[args.index("--status") + 1]
    """) + textwrap.dedent(body))
    script.chmod(0o755)
    return str(script)


def test_command_line_profiles_only_the_measured_call_with_clocks_unlocked(tmp_path):
    cmd = ncu_command("ncu", candidate=SEED, task_spec="gemm", suite="bench", case_index=2, log=tmp_path / "x.csv",
                      status=tmp_path / "s.json", metrics=extra_metrics("sm_90a"))
    joined = " ".join(cmd)
    assert "--clock-control none" in joined
    assert f"--nvtx --nvtx-include {driver.RANGE}/" in joined
    assert "--csv --page details" in joined
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--section"] == list(SECTIONS)
    metrics = cmd[cmd.index("--metrics") + 1]
    assert "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio" in metrics
    assert "sm__pipe_tensor_op_gmma_cycles_active" in metrics
    assert cmd[cmd.index("-m") + 1] == "avo.profile.driver" and cmd[cmd.index("--case") + 1] == "2"
    assert "sm__pipe_tensor_op_gmma" not in ",".join(extra_metrics("sm_100a"))


def test_child_environment_drops_secrets_and_interpreter_mode(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    env = child_env()
    assert "ANTHROPIC_API_KEY" not in env and "TRITON_INTERPRET" not in env
    assert env["CUDA_VISIBLE_DEVICES"] == "3" and env["LC_ALL"] == "C"


def test_missing_ncu_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    with pytest.raises(ProfileError, match=r"Nsight Compute \(ncu\) was not found"):
        find_ncu()
    with pytest.raises(ProfileError, match="ncu"):
        profile_candidate(SEED, "gemm", gpu=H200)


def test_counter_permission_error_is_explained(tmp_path):
    ncu = fake_ncu(tmp_path, f"print({PERMISSION_TEXT!r}); sys.exit(1)\n")
    with pytest.raises(ProfileError, match="ERR_NVGPUCTRPERM.*NVreg_RestrictProfilingToAdminUsers=0"):
        profile_candidate(SEED, "gemm", gpu=H200, ncu=ncu)


def test_a_call_that_launches_no_kernel_is_explained(tmp_path):
    ncu = fake_ncu(tmp_path, """\
        open(log, "w").write("==PROF== Connected to process 9\\n==PROF== Disconnected from process 9\\n"
                             "==WARNING== No kernels were profiled.\\n")
        open(status, "w").write(json.dumps({"ok": True, "case": "4096x4096x4096"}))
    """)
    with pytest.raises(ProfileError, match="no kernel launched inside the measured call on 4096x4096x4096"):
        profile_candidate(SEED, "gemm", gpu=H200, ncu=ncu)


def test_a_failing_candidate_is_reported_with_its_error(tmp_path):
    ncu = fake_ncu(tmp_path, """\
        error = "importing kernel.py failed:\\n  kernel.py:3 in <module>\\nValueError: BLOCK_K must divide K"
        open(status, "w").write(json.dumps({"ok": False, "error": error}))
        sys.exit(1)
    """)
    with pytest.raises(ProfileError, match="failed before its call .* ValueError: BLOCK_K must divide K") as info:
        profile_candidate(SEED, "gemm", gpu=H200, ncu=ncu)
    assert "kernel.py:3" in info.value.detail


def test_a_hanging_profile_is_stopped_at_the_timeout(tmp_path):
    ncu = fake_ncu(tmp_path, "time.sleep(60)\n")
    with pytest.raises(ProfileError, match="did not finish within 2 s"):
        profile_candidate(SEED, "gemm", gpu=H200, ncu=ncu, timeout_s=2)


def test_unknown_extra_metric_retries_with_sections_only_and_keeps_the_raw_csv(tmp_path):
    fixture = tmp_path / FIXTURE.name  # beside the fake ncu, whose folder the sandbox shows (it masks the checkout)
    fixture.write_text(FIXTURE.read_text())
    ncu = fake_ncu(tmp_path, f"""\
        if "--metrics" in args:
            print("==ERROR== Failed to find metric sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_"
                  "sustained_active")
            sys.exit(1)
        open(log, "w").write(open({str(fixture)!r}).read())
        open(status, "w").write(json.dumps({{"ok": True, "case": "4096x4096x4096"}}))
    """)
    result = profile_candidate(SEED, "gemm", gpu=H200, ncu=ncu, out_dir=tmp_path / "profiles")
    assert result.summary["kernel"] == "mm_desc" and result.summary["case"] == "4096x4096x4096"
    assert result.summary["roofline"]["achieved_tflops"] == pytest.approx(711.0, abs=0.05)
    assert result.csv_path.parent == tmp_path / "profiles"
    assert result.csv_path.read_text() == FIXTURE.read_text()
    assert json.loads(result.csv_path.with_suffix(".json").read_text())["kernel"] == "mm_desc"
    assert len(result.text.splitlines()) <= 40


def test_out_of_range_case_is_refused(tmp_path):
    ncu = fake_ncu(tmp_path, "sys.exit(0)\n")
    with pytest.raises(ProfileError, match="case 9 does not exist: the bench suite of gemm has cases 0..3"):
        profile_candidate(SEED, "gemm", gpu=H200, case_index=9, ncu=ncu)


def test_driver_reports_a_candidate_that_cannot_be_imported(tmp_path):
    (tmp_path / "kernel.py").write_text("import nonexistent_module_for_avo_tests\n")
    status = tmp_path / "status.json"
    rc = driver.main(["--candidate", str(tmp_path), "--kernel", "gemm", "--status", str(status)])
    result = json.loads(status.read_text())
    assert rc == 1 and result["ok"] is False
    assert "nonexistent_module_for_avo_tests" in result["error"]


def test_find_ncu_accepts_an_explicit_executable(tmp_path):
    ncu = fake_ncu(tmp_path, "sys.exit(0)\n")
    assert find_ncu(ncu) == ncu
    with pytest.raises(ProfileError):
        find_ncu(str(tmp_path / "missing-ncu"))


def test_the_librarys_call_is_profiled_with_no_candidate_named(tmp_path):
    cmd = ncu_command("ncu", candidate=None, task_spec="attention", suite="wide", case_index=5,
                      log=tmp_path / "x.csv", status=tmp_path / "s.json", metrics=[])
    assert "--library" in cmd and "--candidate" not in cmd
    ncu = fake_ncu(tmp_path, f"""\
        assert "--library" in args and "--candidate" not in args, args
        open(log, "w").write(open({str(FIXTURE)!r}).read())
        open(status, "w").write(json.dumps({{"ok": True, "case": "4096x4096x4096"}}))
    """)
    result = profile_candidate(None, "gemm", gpu=H200, ncu=ncu, sandbox="off", out_dir=tmp_path / "profiles")
    assert result.summary["source"] == "library" and result.csv_path.name.startswith("ncu-library-case0-")
    assert result.text.startswith("ncu profile of the library's kernel mm_desc (grid (512, 1, 1)")
    ours = profile_candidate(SEED, "gemm", gpu=H200, ncu=fake_ncu(tmp_path, f"""\
        open(log, "w").write(open({str(FIXTURE)!r}).read())
        open(status, "w").write(json.dumps({{"ok": True, "case": "4096x4096x4096"}}))
    """), sandbox="off")
    assert ours.summary["source"] == "candidate" and ours.text.startswith("ncu profile of mm_desc")


def test_the_driver_takes_a_candidate_or_the_library_never_both(tmp_path, capsys):
    status = tmp_path / "status.json"
    for argv in (["--kernel", "gemm"], ["--candidate", str(SEED), "--library", "--kernel", "gemm"]):
        with pytest.raises(SystemExit) as info:
            driver.main(argv + ["--status", str(status)])
        assert info.value.code == 2
    assert not status.exists()
