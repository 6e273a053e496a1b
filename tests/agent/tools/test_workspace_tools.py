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


def test_a_hard_link_to_a_file_outside_is_refused_and_the_file_left_alone(ctx, tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text("KEEP = 1\n")
    os.link(outside, ctx.workspace / "x.py")
    for call in (lambda: t.write_file(ctx, t.WriteFileArgs(path="x.py", content="pwned")),
                 lambda: t.edit_file(ctx, t.EditFileArgs(path="x.py", old="KEEP", new="PWNED")),
                 lambda: t.read_file(ctx, t.ReadFileArgs(path="x.py"))):
        with pytest.raises(ToolError, match=r"x.py is a hard link \(2 names\)"):
            call()
    assert outside.read_text() == "KEEP = 1\n"
    text, data = t.list_files(ctx, t.ListFilesArgs())
    assert data["refused"] == [{"path": "x.py", "refused": "a hard link (2 names)"}]
    assert "x.py  (refused: a hard link" in text and "x.py" not in [f["path"] for f in data["files"]]


def test_a_symlink_inside_the_workspace_is_not_followed_either(ctx):
    (ctx.workspace / "alias.py").symlink_to(ctx.workspace / "kernel.py")
    (ctx.workspace / "subalias").symlink_to(ctx.workspace / "sub")
    with pytest.raises(ToolError, match="symlink"):
        t.write_file(ctx, t.WriteFileArgs(path="alias.py", content="x"))
    with pytest.raises(ToolError, match="symlink"):
        t.read_file(ctx, t.ReadFileArgs(path="subalias/util.cu"))
    assert (ctx.workspace / "kernel.py").read_text().startswith("BLOCK = 64")


def test_a_fifo_or_socket_is_refused_without_blocking(ctx):
    import socket
    import threading

    os.mkfifo(ctx.workspace / "pipe.py")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(ctx.workspace / "sock.py"))
    errors = []

    def calls():
        for path, what in (("pipe.py", "a FIFO"), ("sock.py", "a socket")):
            for tool, args in ((t.read_file, t.ReadFileArgs(path=path)),
                               (t.write_file, t.WriteFileArgs(path=path, content="x")),
                               (t.edit_file, t.EditFileArgs(path=path, old="a", new="b"))):
                try:
                    tool(ctx, args)
                except ToolError as exc:
                    errors.append((what, str(exc)))

    thread = threading.Thread(target=calls, daemon=True)
    thread.start()
    thread.join(20)
    try:
        assert not thread.is_alive(), "blocked on the FIFO"
        assert len(errors) == 6 and all(f"is {what}" in text for what, text in errors)
    finally:  # a regression blocks in open(); a writer lets it go
        server.close()
        try:
            os.close(os.open(ctx.workspace / "pipe.py", os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass


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
