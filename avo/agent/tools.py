"""The agent's own tools: workspace files, evaluation, the lineage, notes, and an opt-in shell.

File tools are confined to the candidate workspace: absolute paths, `..` and symlinks that lead out are refused.
Each tool returns text for the model and a data dict for agents that do not read prose (and for the transcript).
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, Field

from avo.util import procs
from avo.agent.acceptance import evaluate_workspace
from avo.agent.toolbase import Tool, ToolContext, ToolError

MAX_READ_BYTES = 200_000
MAX_OUTPUT_CHARS = 12_000
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


class ReadFileArgs(BaseModel):
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


class WriteFileArgs(BaseModel):
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


class EditFileArgs(BaseModel):
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


class ListFilesArgs(BaseModel):
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


class EvaluateArgs(BaseModel):
    rationale: str = Field(description="What you changed and why, with the gain you predict (recorded in the lineage)")


def evaluate(ctx: ToolContext, args: EvaluateArgs):
    """Score the workspace: correctness on the check suite, speed against the library on the bench suite.

    Every evaluated candidate is committed to the lineage (passing or failing). A correct candidate faster than the
    best by more than the measured noise is re-timed side by side with the best and, if confirmed, becomes the best.
    Byte-identical source is not re-evaluated: the earlier result is returned.
    """
    return evaluate_workspace(ctx, args.rationale)


class LineageArgs(BaseModel):
    limit: int = Field(20, ge=1, le=500, description="How many recent candidates to list")


def lineage(ctx: ToolContext, args: LineageArgs):
    """Recent candidates, newest first: status, fitness, accepted or not, and the reason for failures."""
    infos = ctx.lineage.log(limit=args.limit)
    best, baseline = ctx.lineage.best, ctx.lineage.baseline
    rows = [f"best {best or '-'}, baseline {baseline or '-'}, workspace from {ctx.state.get('parent') or '-'}",
            "cid    parent status         fitness  summary"]
    for info in infos:
        mark = "*" if info.cid == best else ("+" if info.accepted else " ")
        rows.append(f"{info.cid}{mark} {info.parent or '-':6} {info.status:14} {info.fitness:9.4g}  "
                    f"{info.summary[:120]} | {info.rationale[:100]}")
    keys = ("cid", "parent", "status", "fitness", "accepted", "summary", "rationale")
    data = {"best": best, "baseline": baseline, "candidates": [{k: getattr(i, k) for k in keys} for i in infos]}
    return "\n".join(rows), data


class DiffArgs(BaseModel):
    a: str = Field(description="A candidate id (c0003), 'best', 'baseline', or 'cid^' (its parent)")
    b: str = Field("workspace", description="Another candidate, or 'workspace' for the current working copy")


def diff(ctx: ToolContext, args: DiffArgs):
    """Unified diff between two candidates, or between a candidate and the workspace."""
    a = ctx.lineage.resolve(args.a)
    if args.b == "workspace":
        text = workspace_diff(ctx, a)
    else:
        text = ctx.lineage.diff(a, ctx.lineage.resolve(args.b))
    shown = text if len(text) <= MAX_OUTPUT_CHARS else text[:MAX_OUTPUT_CHARS] + "\n... (diff truncated)"
    return shown or "(no differences)", {"a": a, "b": args.b, "diff": text}


def workspace_diff(ctx: ToolContext, cid: str) -> str:
    import difflib

    with procs.temp_dir("diff") as tmp:
        ctx.lineage.checkout(cid, Path(tmp))
        old, new = snapshot(Path(tmp)), snapshot(ctx.workspace)
    out = []
    for name in sorted(set(old) | set(new)):
        out.extend(difflib.unified_diff(old.get(name, "").splitlines(True), new.get(name, "").splitlines(True),
                                        f"{cid}/{name}", f"workspace/{name}"))
    return "".join(out)


def snapshot(root: Path) -> dict[str, str]:
    files = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in filenames:
            path = Path(dirpath) / name
            if name != "avo.json":
                files[path.relative_to(root).as_posix()] = path.read_text(errors="replace")
    return files


class CheckoutArgs(BaseModel):
    cid: str = Field(description="Candidate to restore into the workspace: c0003, 'best', 'baseline', 'cid^'")


def checkout(ctx: ToolContext, args: CheckoutArgs):
    """Replace the workspace with a candidate's files (unsaved edits are lost); later candidates descend from it."""
    cid = ctx.lineage.resolve(args.cid)
    ctx.lineage.checkout(cid, ctx.workspace)
    ctx.state["parent"] = cid
    info = ctx.lineage.info(cid)
    return f"workspace now holds {cid}: {info.summary}", {"cid": cid, "status": info.status, "fitness": info.fitness}


class NoteArgs(BaseModel):
    text: str = Field(description="What to remember: findings, dead ends, ideas to try (kept across context resets)")


def note(ctx: ToolContext, args: NoteArgs):
    """Append to the run's notes file, the memory that survives context resets and resumes."""
    path = Path(ctx.run.notes_path)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")
    with path.open("a") as f:
        f.write(f"- [{stamp}] {args.text.strip()}\n")
    return f"noted ({len(args.text)} chars)", {"chars": len(args.text)}


class ShellArgs(BaseModel):
    command: str = Field(description="A shell command, run in the workspace")
    timeout_s: float = Field(60.0, gt=0, le=600, description="Seconds before the command is killed")


SHELL_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR", "USER", "CUDA_VISIBLE_DEVICES", "CUDA_HOME",
                  "LD_LIBRARY_PATH")


def shell(ctx: ToolContext, args: ShellArgs):
    """Run a shell command in the workspace (enabled by --allow-shell): no API keys in its environment."""
    if not getattr(getattr(ctx.config, "agent", None), "allow_shell", False):
        raise ToolError("the shell tool is disabled (start the run with --allow-shell to enable it)")
    env = {k: os.environ[k] for k in SHELL_ENV_KEEP if k in os.environ}
    if ctx.device == "interpret":
        env["TRITON_INTERPRET"] = "1"
    # its whole group is killed at the timeout (compilers and kernels it started), and with avo
    returncode, out, _ = procs.run(["/bin/sh", "-c", args.command], timeout_s=args.timeout_s, cwd=ctx.workspace,
                                   env=env)
    timed_out = returncode is None
    if len(out) > MAX_OUTPUT_CHARS:
        out = out[:MAX_OUTPUT_CHARS // 2] + "\n... (output truncated) ...\n" + out[-MAX_OUTPUT_CHARS // 2:]
    head = f"killed after {args.timeout_s:g}s" if timed_out else f"exit {returncode}"
    return f"{head}\n{out}", {"returncode": -9 if timed_out else returncode, "timed_out": timed_out, "output": out}


def tools() -> list[Tool]:
    return [
        Tool("read_file", ReadFileArgs, read_file),
        Tool("write_file", WriteFileArgs, write_file),
        Tool("edit_file", EditFileArgs, edit_file),
        Tool("list_files", ListFilesArgs, list_files),
        Tool("evaluate", EvaluateArgs, evaluate),
        Tool("lineage", LineageArgs, lineage),
        Tool("diff", DiffArgs, diff),
        Tool("checkout", CheckoutArgs, checkout),
        Tool("note", NoteArgs, note),
        Tool("shell", ShellArgs, shell),
    ]
