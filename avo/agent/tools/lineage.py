"""The lineage tools: `lineage` (recent candidates), `diff` (two candidates, or one and the workspace) and
`checkout` (a candidate's files back into the workspace)."""

from __future__ import annotations

import difflib
from pathlib import Path

from pydantic import Field

from avo.agent.acceptance import bucket_table
from avo.agent.tools.base import Tool, ToolArgs, ToolContext, ToolError
from avo.agent.tools.workspace import skipped
from avo.util import procs, safe_files

MAX_OUTPUT_CHARS = 12_000


class LineageArgs(ToolArgs):
    limit: int = Field(20, ge=1, le=500, description="How many recent candidates to list")


def lineage(ctx: ToolContext, args: LineageArgs):
    """Recent candidates, newest first: status, fitness, accepted or not, and the reason for failures."""
    infos = ctx.lineage.log(limit=args.limit)
    best, baseline = ctx.lineage.best, ctx.lineage.baseline
    rows = [f"best {best or '-'}, baseline {baseline or '-'}, workspace from {ctx.state.parent or '-'}",
            "cid    parent status         fitness  summary"]
    for info in infos:
        mark = "*" if info.cid == best else ("+" if info.accepted else " ")
        rows.append(f"{info.cid}{mark} {info.parent or '-':6} {info.status:14} {info.fitness:9.4g}  "
                    f"{info.summary[:120]} | {info.rationale[:100]}")
    keys = ("cid", "parent", "status", "fitness", "accepted", "summary", "rationale")
    best_result = ctx.run.load_eval(best) if best else None
    # Each row's per-bucket fitness too, as an evaluate result gives it: which table entries the timed cases take.
    data = {"best": best, "baseline": baseline,
            "candidates": [{**{k: getattr(i, k) for k in keys},
                            "buckets": bucket_table(ctx.run.load_eval(i.cid), best_result)} for i in infos]}
    return "\n".join(rows), data


class DiffArgs(ToolArgs):
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
    with procs.temp_dir("diff") as tmp:
        ctx.lineage.checkout(cid, Path(tmp))
        old, new = snapshot(Path(tmp)), snapshot(ctx.workspace)
    out = []
    for name in sorted(set(old) | set(new)):
        out.extend(difflib.unified_diff(old.get(name, "").splitlines(True), new.get(name, "").splitlines(True),
                                        f"{cid}/{name}", f"workspace/{name}"))
    return "".join(out)


def snapshot(root: Path) -> dict[str, str]:
    """The text of a folder's files by path, read as regular files only (a FIFO there must not block the diff)."""
    try:
        found = safe_files.regular_files(root, skipped)
        return {rel: safe_files.read_bytes(root, rel).decode(errors="replace") for rel, _ in found
                if rel.rsplit("/", 1)[-1] != "avo.json"}
    except safe_files.UnsafeFile as exc:
        raise ToolError(f"{exc}; the next evaluate records it as rejected and removes it") from None


class CheckoutArgs(ToolArgs):
    cid: str = Field(description="Candidate to restore into the workspace: c0003, 'best', 'baseline', 'cid^'")


def checkout(ctx: ToolContext, args: CheckoutArgs):
    """Replace the workspace with a candidate's files (unsaved edits are lost); later candidates descend from it."""
    cid = ctx.lineage.resolve(args.cid)
    ctx.lineage.checkout(cid, ctx.workspace)
    ctx.state.parent = cid
    info = ctx.lineage.info(cid)
    return f"workspace now holds {cid}: {info.summary}", {"cid": cid, "status": info.status, "fitness": info.fitness}


def tools() -> list[Tool]:
    return [
        Tool("lineage", LineageArgs, lineage),
        Tool("diff", DiffArgs, diff),
        Tool("checkout", CheckoutArgs, checkout),
    ]
