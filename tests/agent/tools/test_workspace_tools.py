"""Workspace tools: confinement, edits, listing, the opt-in shell, and the registry that offers them."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from avo.agent.tools import workspace as t
from avo.agent.tools.notes import NoteArgs, note
from avo.agent.tools.shell import ShellArgs, shell
from avo.agent.tools.base import ToolContext, ToolError, collect
from avo.config import RunConfig


@pytest.fixture
def ctx(tmp_path):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "kernel.py").write_text("BLOCK = 64\nx = 1\nx = 1\n")
    (workspace / "sub").mkdir()
    (workspace / "sub" / "util.cu").write_text("// cuda\n")
    return ToolContext(workspace=workspace, task_spec="gemm", device="interpret", gpu=None, config=RunConfig())


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside.txt", "sub/../../outside.txt", "..", "", "sub\\..\\..\\x"])
def test_paths_leaving_the_workspace_are_refused(ctx, path):
    with pytest.raises(ToolError):
        t.read_file(ctx, t.ReadFileArgs(path=path))
    with pytest.raises(ToolError):
        t.write_file(ctx, t.WriteFileArgs(path=path, content="pwned"))
    assert not (ctx.workspace.parent / "outside.txt").exists()


def test_symlinks_that_lead_out_are_refused(ctx, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (ctx.workspace / "link.txt").symlink_to(secret)
    (ctx.workspace / "linkdir").symlink_to(tmp_path)
    with pytest.raises(ToolError, match="outside"):
        t.read_file(ctx, t.ReadFileArgs(path="link.txt"))
    with pytest.raises(ToolError, match="outside"):
        t.write_file(ctx, t.WriteFileArgs(path="linkdir/new.txt", content="x"))
    assert secret.read_text() == "top secret" and not (tmp_path / "new.txt").exists()


def test_read_write_edit_list(ctx):
    text, data = t.read_file(ctx, t.ReadFileArgs(path="kernel.py"))
    assert data == {"path": "kernel.py", "text": "BLOCK = 64\nx = 1\nx = 1\n"} and "BLOCK = 64" in text
    t.write_file(ctx, t.WriteFileArgs(path="new/helper.py", content="y = 2\n"))
    assert (ctx.workspace / "new" / "helper.py").read_text() == "y = 2\n"
    t.edit_file(ctx, t.EditFileArgs(path="kernel.py", old="BLOCK = 64", new="BLOCK = 128"))
    assert (ctx.workspace / "kernel.py").read_text().startswith("BLOCK = 128\n")
    with pytest.raises(ToolError, match="2 times"):
        t.edit_file(ctx, t.EditFileArgs(path="kernel.py", old="x = 1", new="x = 2"))
    _, data = t.edit_file(ctx, t.EditFileArgs(path="kernel.py", old="x = 1", new="x = 2", replace_all=True))
    assert data["replacements"] == 2
    with pytest.raises(ToolError, match="not found"):
        t.edit_file(ctx, t.EditFileArgs(path="kernel.py", old="nope", new=""))
    (ctx.workspace / "__pycache__").mkdir()
    (ctx.workspace / "__pycache__" / "k.pyc").write_bytes(b"\0")
    _, data = t.list_files(ctx, t.ListFilesArgs())
    assert [f["path"] for f in data["files"]] == ["kernel.py", "new/helper.py", "sub/util.cu"]
    _, data = t.list_files(ctx, t.ListFilesArgs(path="sub"))
    assert [f["path"] for f in data["files"]] == ["sub/util.cu"]


def test_note_appends_to_the_runs_memory(ctx, tmp_path):
    ctx.run = SimpleNamespace(notes_path=tmp_path / "notes.md")
    note(ctx, NoteArgs(text="num_stages 4 spills"))
    note(ctx, NoteArgs(text="BLOCK_K 128 is out of shared memory"))
    lines = (tmp_path / "notes.md").read_text().splitlines()
    assert len(lines) == 2 and lines[0].endswith("num_stages 4 spills")


def test_shell_is_off_unless_allowed_and_scrubs_the_environment(ctx, monkeypatch):
    assert "shell" not in collect(lambda tool: tool.name != "shell" or ctx.config.agent.allow_shell)
    with pytest.raises(ToolError, match="disabled"):
        shell(ctx, ShellArgs(command="true"))
    ctx.config = RunConfig.model_validate({"agent": {"allow_shell": True}})
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-very-secret-value-123")
    text, data = shell(ctx, ShellArgs(command="pwd; env"))
    assert data["returncode"] == 0
    assert os.path.realpath(text.splitlines()[1]) == os.path.realpath(ctx.workspace)
    assert "very-secret" not in text and "TRITON_INTERPRET=1" in text
    _, data = shell(ctx, ShellArgs(command="sleep 5", timeout_s=0.3))
    assert data["timed_out"] is True


def test_registry_offers_the_contract_tools_with_schemas():
    found = collect()
    for name in ("read_file", "write_file", "edit_file", "list_files", "evaluate", "lineage", "diff", "checkout",
                 "note"):
        assert name in found
    spec = found["edit_file"].spec()
    assert set(spec.input_schema["required"]) == {"path", "old", "new"} and "exact" in spec.description.lower()


def test_every_tool_refuses_arguments_it_does_not_know():
    for tool in collect().values():
        schema = tool.spec().input_schema
        assert schema.get("additionalProperties") is False, tool.name
