"""The `evaluate` tool: score the workspace, commit it, and decide whether it becomes the best (acceptance.py)."""

from __future__ import annotations

from pydantic import Field

from avo.agent import unsafe_files
from avo.agent.acceptance import evaluate_workspace, file_result
from avo.agent.tools.base import Tool, ToolArgs, ToolContext


class EvaluateArgs(ToolArgs):
    rationale: str = Field(description="What you changed and why, with the gain you predict (recorded in the lineage)")


def evaluate(ctx: ToolContext, args: EvaluateArgs):
    """Score the workspace: correctness on the check suite, speed against the library on the bench suite.

    Every evaluated candidate is committed to the lineage (passing or failing). A correct candidate faster than the
    best by more than the measured noise is re-timed side by side with the best and, if confirmed, becomes the best.
    Byte-identical source is not re-evaluated: the earlier result is returned.
    """
    refused = unsafe_files.clear(ctx.workspace)
    if refused:  # left by an earlier candidate's run: recorded as rejected, not evaluated
        return file_result(ctx, ctx.workspace, ctx.state.parent, args.rationale, unsafe_files.rejection(refused))
    return evaluate_workspace(ctx, args.rationale)


def tools() -> list[Tool]:
    return [Tool("evaluate", EvaluateArgs, evaluate)]
