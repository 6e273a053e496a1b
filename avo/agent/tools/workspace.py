"""The workspace tools: `read_file`, `write_file`, `edit_file`, `list_files`.

They are confined to the candidate workspace: absolute paths, `..` and symlinks that lead out are refused. Each tool
returns text for the model and a data dict for agents that do not read prose (and for the transcript).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from pydantic import Field

from avo.agent.tools.base import Tool, ToolArgs, ToolContext, ToolError

MAX_READ_BYTES = 200_000
SKIP_DIRS = {"__pycache__", ".git", ".pytest_cache"}


def confined(ctx: ToolContext, path: str) -> Path:
    """`path` inside the workspace, or a ToolError saying why not."""
    if not path or "\x00" in path:
        raise ToolError("empty or invalid path")
    pure = PurePosixPath(path.replace("\\", "/"))
    if pure.is_absolute() or Path(path).is_absolute():
        raise ToolError(f"'{path}' is absolute: give a path relative to the candidate workspace (e.g. kernel.py)")
    if ".." in pure.parts:
        raise ToolError(f"'{path}' contains '..': only files inside the candidate workspace are reachable")
    root = ctx.workspace.resolve()
    target = (root / pure).resolve()
    if target != root and root not in target.parents:
        raise ToolError(f"'{path}' leads outside the candidate workspace (a symlink): refused")
    return target


def relative(ctx: ToolContext, target: Path) -> str:
    return target.relative_to(ctx.workspace.resolve()).as_posix() or "."


class ReadFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the candidate workspace, e.g. kernel.py")


def read_file(ctx: ToolContext, args: ReadFileArgs):
    """Read a text file of the candidate workspace."""
    target = confined(ctx, args.path)
    if not target.is_file():
        raise ToolError(f"no file '{args.path}' in the workspace (list_files shows what is there)")
    raw = target.read_bytes()
    if len(raw) > MAX_READ_BYTES:
        raise ToolError(f"'{args.path}' is {len(raw)} bytes, over the {MAX_READ_BYTES}-byte read limit")
    text = raw.decode("utf-8", errors="replace")
    rel = relative(ctx, target)
    return f"{rel} ({text.count(chr(10)) + 1} lines):\n{text}", {"path": rel, "text": text}


class WriteFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the candidate workspace")
    content: str = Field(description="The complete new content of the file")


def write_file(ctx: ToolContext, args: WriteFileArgs):
    """Create or overwrite a file in the candidate workspace with the given content."""
    target = confined(ctx, args.path)
    if target.is_dir():
        raise ToolError(f"'{args.path}' is a directory")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(args.content)
    rel = relative(ctx, target)
    return f"wrote {rel} ({len(args.content)} chars)", {"path": rel, "chars": len(args.content)}


class EditFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the candidate workspace")
    old: str = Field(description="Exact text to replace; must occur exactly once unless replace_all is set")
    new: str = Field(description="Replacement text")
    replace_all: bool = Field(False, description="Replace every occurrence instead of exactly one")


def edit_file(ctx: ToolContext, args: EditFileArgs):
    """Replace an exact piece of text in a workspace file (include enough context to make it unique)."""
    target = confined(ctx, args.path)
    if not target.is_file():
        raise ToolError(f"no file '{args.path}' in the workspace")
    if not args.old:
        raise ToolError("'old' is empty: give the exact text to replace")
    text = target.read_text()
    count = text.count(args.old)
    if count == 0:
        raise ToolError(f"the text to replace was not found in {args.path} (read_file shows its current content)")
    if count > 1 and not args.replace_all:
        raise ToolError(f"the text to replace occurs {count} times in {args.path}: add context or set replace_all")
    target.write_text(text.replace(args.old, args.new) if args.replace_all else text.replace(args.old, args.new, 1))
    replaced = count if args.replace_all else 1
    rel = relative(ctx, target)
    return f"edited {rel}: {replaced} replacement(s)", {"path": rel, "replacements": replaced}


class ListFilesArgs(ToolArgs):
    path: str = Field(".", description="Directory relative to the candidate workspace")


def list_files(ctx: ToolContext, args: ListFilesArgs):
    """List the files under a directory of the candidate workspace, with their sizes."""
    root = confined(ctx, args.path) if args.path not in ("", ".") else ctx.workspace.resolve()
    if not root.is_dir():
        raise ToolError(f"no directory '{args.path}' in the workspace")
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            path = Path(dirpath) / name
            files.append({"path": relative(ctx, path), "bytes": path.stat().st_size if path.exists() else 0})
    lines = [f"{f['path']}  ({f['bytes']} bytes)" for f in files] or ["(empty)"]
    return "\n".join(lines), {"files": files}


def tools() -> list[Tool]:
    return [
        Tool("read_file", ReadFileArgs, read_file),
        Tool("write_file", WriteFileArgs, write_file),
        Tool("edit_file", EditFileArgs, edit_file),
        Tool("list_files", ListFilesArgs, list_files),
    ]
