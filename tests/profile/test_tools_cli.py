"""The `profile` and `inspect_compile` agent tools and the `avo profile` / `avo inspect` commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from avo.agent.toolbase import ToolContext, ToolError, collect
from avo.cli import main
from avo.gpus import PROFILES, nvml_device_name
from avo.profile.tools import InspectArgs, ProfileArgs, inspect_compile, profile, tools

TINY = Path(__file__).parent / "tiny_gemm"
H200 = PROFILES["h200"]


def test_tools_are_registered_with_the_agreed_arguments():
    found = {t.name: t for t in tools()}
    assert set(found) == {"profile", "inspect_compile"}
    schema = found["profile"].spec().input_schema
    assert schema["properties"]["case"]["default"] == 0
    assert found["inspect_compile"].spec().input_schema.get("properties", {}) == {}
    assert {"profile", "inspect_compile"} <= set(collect())


def test_profile_tool_under_the_interpreter_points_to_inspect_compile():
    ctx = ToolContext(workspace=TINY, task_spec="gemm", device="interpret", gpu=H200)
    with pytest.raises(ToolError, match="needs a GPU.*inspect_compile"):
        profile(ctx, ProfileArgs(case=0))


def test_profile_tool_without_ncu_gives_an_error_the_agent_can_read(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    ctx = ToolContext(workspace=TINY, task_spec="gemm", device="cuda", gpu=H200)
    with pytest.raises(ToolError, match=r"Nsight Compute \(ncu\) was not found"):
        profile(ctx, ProfileArgs(case=0))


def test_inspect_tool_on_a_folder_without_kernel_py_is_a_tool_error(tmp_path):
    ctx = ToolContext(workspace=tmp_path, task_spec="gemm", device="interpret", gpu=H200)
    with pytest.raises(ToolError, match="no kernel.py"):
        inspect_compile(ctx, InspectArgs())


def test_unknown_task_is_a_tool_error_not_a_crash():
    ctx = ToolContext(workspace=TINY, task_spec="matmul", device="interpret", gpu=H200)
    with pytest.raises(ToolError, match="unknown kernel 'matmul'"):
        inspect_compile(ctx, InspectArgs())


def _one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("avo: error:")
    return err


def test_bad_input_is_one_line_with_exit_code_2(capsys, tmp_path):
    tiny = str(TINY)
    assert "candidate folder not found" in _one_line_error(capsys, ["inspect", str(tmp_path / "x"), "--kernel", "gemm"])
    assert "has no kernel.py" in _one_line_error(capsys, ["inspect", str(tmp_path), "--kernel", "gemm"])
    assert "unknown GPU 'a100'" in _one_line_error(capsys, ["inspect", tiny, "--kernel", "gemm", "--gpu", "a100"])
    assert "--case must be 0 or more" in _one_line_error(capsys, ["profile", tiny, "--kernel", "gemm", "--case", "-1"])
    assert "does not exist" in _one_line_error(capsys, ["inspect", tiny, "--kernel", "gemm", "--case", "7"])
    assert "Missing option '--kernel'" in _one_line_error(capsys, ["profile", str(TINY)])


@pytest.mark.skipif(nvml_device_name() is not None, reason="this machine has a GPU")
def test_profile_without_a_gpu_says_so(capsys):
    err = _one_line_error(capsys, ["profile", str(TINY), "--kernel", "gemm"])
    assert "needs an NVIDIA GPU" in err and "avo inspect" in err


def test_avo_inspect_prints_the_report_as_json(capsys):
    assert main(["inspect", str(TINY), "--kernel", "gemm", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kernel"] == "_tiny_gemm_kernel" and data["target"] == "sm_90a"
    assert data["histogram"]["HGMMA"] > 0 and data["spills"]["store_bytes"] == 0
