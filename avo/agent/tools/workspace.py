"""The workspace tools: `read_file`, `write_file`, `edit_file`, `list_files`.

They are confined to the candidate workspace: absolute paths, `..` and symlinks are refused, and files are read and
written as regular files only (avo.util.safe_files): a hard link (its other name may be outside), a FIFO, a socket or
a device is refused, never followed or opened. Each tool returns text for the model and a data dict for agents that
do not read prose (and for the transcript).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from pydantic import Field

from avo.agent.tools.base import Tool, ToolArgs, ToolContext, ToolError
from avo.util import safe_files

MAX_READ_BYTES = 200_000
SKIP_DIRS = {"__pycache__", ".git", ".pytest_cache"}


def confined(ctx: ToolContext, path: str) -> str:
    """`path` as a relative posix path inside the workspace, reached through no symlink; or a ToolError."""
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
    rel = PurePosixPath(*[p for p in pure.parts if p != "."]).as_posix()
    if target != root / rel:
        raise ToolError(f"'{path}' goes through a symlink: the file tools follow no links")
    return rel


def skipped(rel: str, is_dir: bool) -> bool:
    """The folders the file tools never look into (caches, git), as a safe_files skip rule."""
    return is_dir and rel.rsplit("/", 1)[-1] in SKIP_DIRS


@contextmanager
def refusing(path: str) -> Iterator[None]:
    """A file's errors as messages for the model."""
    try:
        yield
    except safe_files.UnsafeFile as exc:
        raise ToolError(f"{exc}; refused") from None
    except IsADirectoryError:
        raise ToolError(f"'{path}' is a directory") from None
    except (FileNotFoundError, NotADirectoryError, ValueError):
        raise ToolError(f"no file '{path}' in the workspace (list_files shows what is there)") from None


class ReadFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the candidate workspace, e.g. kernel.py")


def read_file(ctx: ToolContext, args: ReadFileArgs):
    """Read a text file of the candidate workspace."""
    rel = confined(ctx, args.path)
    with refusing(args.path):
        raw, st = safe_files.read_file(ctx.workspace, rel, limit=MAX_READ_BYTES)
    if len(raw) > MAX_READ_BYTES:
        raise ToolError(f"'{args.path}' is {st.st_size} bytes, over the {MAX_READ_BYTES}-byte read limit")
    text = raw.decode("utf-8", errors="replace")
    return f"{rel} ({text.count(chr(10)) + 1} lines):\n{text}", {"path": rel, "text": text}


class WriteFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the candidate workspace")
    content: str = Field(description="The complete new content of the file")


def write_file(ctx: ToolContext, args: WriteFileArgs):
    """Create or overwrite a file in the candidate workspace with the given content."""
    rel = confined(ctx, args.path)
    with refusing(args.path):
        safe_files.write_bytes(ctx.workspace, rel, args.content.encode())
    return f"wrote {rel} ({len(args.content)} chars)", {"path": rel, "chars": len(args.content)}


class EditFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the candidate workspace")
    old: str = Field(description="Exact text to replace; must occur exactly once unless replace_all is set")
    new: str = Field(description="Replacement text")
    replace_all: bool = Field(False, description="Replace every occurrence instead of exactly one")


def edit_file(ctx: ToolContext, args: EditFileArgs):
    """Replace an exact piece of text in a workspace file (include enough context to make it unique)."""
    rel = confined(ctx, args.path)
    if not args.old:
        raise ToolError("'old' is empty: give the exact text to replace")
    with refusing(args.path):
        raw, _ = safe_files.read_file(ctx.workspace, rel)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"'{args.path}' is not UTF-8 text: rewrite it with write_file") from None
    count = text.count(args.old)
    if count == 0:
        raise ToolError(f"the text to replace was not found in {args.path} (read_file shows its current content)")
    if count > 1 and not args.replace_all:
        raise ToolError(f"the text to replace occurs {count} times in {args.path}: add context or set replace_all")
    new = text.replace(args.old, args.new) if args.replace_all else text.replace(args.old, args.new, 1)
    with refusing(args.path):
        safe_files.write_bytes(ctx.workspace, rel, new.encode())
    replaced = count if args.replace_all else 1
    return f"edited {rel}: {replaced} replacement(s)", {"path": rel, "replacements": replaced}


class ListFilesArgs(ToolArgs):
    path: str = Field(".", description="Directory relative to the candidate workspace")


def list_files(ctx: ToolContext, args: ListFilesArgs):
    """List the files under a directory of the candidate workspace, with their sizes."""
    rel = confined(ctx, args.path) if args.path not in ("", ".") else "."
    root = ctx.workspace / rel
    if root.is_symlink() or not root.is_dir():
        raise ToolError(f"no directory '{args.path}' in the workspace")
    prefix = "" if rel == "." else rel + "/"
    found, refused = safe_files.scan(root, skipped)
    files = [{"path": prefix + name, "bytes": st.st_size} for name, st in found]
    refusals = [{"path": prefix + r.rel, "refused": r.what} for r in refused]
    lines = [f"{f['path']}  ({f['bytes']} bytes)" for f in files]
    lines += [f"{r['path']}  (refused: {r['refused']}; the file tools read and write regular files only)"
              for r in refusals]
    return "\n".join(lines or ["(empty)"]), {"files": files, **({"refused": refusals} if refusals else {})}


def tools() -> list[Tool]:
    return [
        Tool("read_file", ReadFileArgs, read_file),
        Tool("write_file", WriteFileArgs, write_file),
        Tool("edit_file", EditFileArgs, edit_file),
        Tool("list_files", ListFilesArgs, list_files),
    ]
