"""The `profile` and `inspect_compile` agent tools (the commands: tests/commands/test_profile_cli.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from avo.agent.tools.base import ToolContext, ToolError, collect
from avo.gpus import PROFILES
from avo.agent.tools.profile import InspectArgs, ProfileArgs, inspect_compile, profile, tools

TINY = Path(__file__).parents[2] / "profile" / "tiny_gemm"
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


def test_profile_tool_profiles_the_library_when_asked(monkeypatch):
    seen = {}

    def fake_profile(candidate_dir, task_spec, **kwargs):
        seen["candidate"] = candidate_dir
        raise RuntimeError("stop here")

    monkeypatch.setattr("avo.profile.ncu.profile_candidate", fake_profile)
    ctx = ToolContext(workspace=TINY, task_spec="gemm", device="cuda", gpu=H200)
    for library, expected in ((True, None), (False, TINY)):
        with pytest.raises(ToolError, match="stop here"):
            profile(ctx, ProfileArgs(case=0, library=library))
        assert seen["candidate"] == expected
    assert ProfileArgs(case=0).library is False
