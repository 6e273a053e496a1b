"""A model response's tool calls, with its `evaluate` calls scored at once when the evaluator has several workers.

Each `evaluate` scores the workspace as it is at that call: its files are copied aside and handed to the pool
(evaluate/pool.py), and the calls after it run on. Results are filed in call order, one at a time, exactly as one
`evaluate` after another would be: committed, then decided (noise-aware, a new best confirmed side by side with the
old one), so the lineage stays ordered and a best is never the winner of a race between workers. A candidate's
parent is what it would be one call at a time: the candidate the workspace came from at that call (the previous
`evaluate` of the response, or the candidate a `checkout` brought back). Tools that only touch the workspace or the
notes, and `checkout` of a committed candidate id, run while evaluations are in flight; any other tool first waits
for them (it may read the lineage or the best), and so does a budget check that would otherwise end the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from avo.util import procs, safe_files
from avo.agent import unsafe_files
from avo.agent.acceptance import answer_duplicate, file_result
from avo.agent.models.base import ToolCall, ToolResult
from avo.agent.stops import StopRun
from avo.evaluate.result import EvalResult
from avo.run.lineage.records import CID_PATTERN, content_hash, left_out

OVERLAPPING = {"read_file", "write_file", "edit_file", "list_files", "note"}
"""Tools that may run while evaluations are in flight: they touch only the workspace or the notes."""


def run_calls(agent, calls: list[ToolCall]) -> list[ToolResult]:
    """The results of a turn's calls, in call order."""
    evaluator = agent.ctx.evaluator
    parallel = getattr(evaluator, "size", 1) > 1 and hasattr(evaluator, "submit")
    if not parallel or sum(c.name == "evaluate" for c in calls) < 2:
        results = []
        for call in calls:
            agent.check_budget()
            results.append(agent.execute(call))
        return results
    return Batch(agent).run(calls)


@dataclass
class Pending:
    index: int
    call: ToolCall
    rationale: str
    folder: Path
    scratch: Any
    parent: str | int | None
    """A candidate id, or the position in the batch of the evaluation whose candidate it follows."""
    content: str = ""
    """The folder's content hash (a later evaluate of the same files in the batch is its duplicate)."""
    duplicate_of: str | int | None = None
    future: Any = None
    cid: str | None = None
    refused: EvalResult | None = None
    """The rejection of a workspace that held links or special files (nothing evaluated)."""


class Batch:
    def __init__(self, agent):
        self.agent, self.ctx = agent, agent.ctx
        self.pending: list[Pending] = []
        self.follows: int | None = None
        """The batch position whose candidate the workspace comes from now (None: `ctx.state.parent`)."""

    def run(self, calls: list[ToolCall]) -> list[ToolResult]:
        results: list[ToolResult | None] = [None] * len(calls)
        for i, call in enumerate(calls):
            if call.name == "evaluate" and call.raw_arguments is None:
                self.check_budget(results)
                results[i] = self.submit(i, call)
                continue
            if self.pending and not self.overlaps(call):
                self.drain(results)
            self.check_budget(results)
            results[i] = self.agent.execute(call)
            if call.name == "checkout" and not results[i].is_error:
                self.follows = None
        self.drain(results)
        return results

    def check_budget(self, results: list) -> None:
        """The loop's budget check before a call, counting the candidates in flight as filed: once they fill the
        candidate budget they are filed and the check stops the run, as it would one call at a time; evaluations in
        flight are filed before any other stop ends the run too."""
        limit = self.agent.budget.max_candidates
        if limit is not None and self.ctx.state.candidates + self.in_flight() >= limit:
            self.drain(results)
        try:
            self.agent.check_budget()
        except StopRun:
            self.drain(results)
            raise

    def in_flight(self) -> int:
        return sum(p.duplicate_of is None for p in self.pending)

    def overlaps(self, call: ToolCall) -> bool:
        if call.name in OVERLAPPING:
            return True
        cid = str(call.arguments.get("cid", "")) if call.name == "checkout" else ""
        return bool(CID_PATTERN.fullmatch(cid)) and cid in self.ctx.lineage.cids()

    def submit(self, index: int, call: ToolCall) -> ToolResult | None:
        from avo.agent.tools.evaluate import EvaluateArgs

        try:
            args = EvaluateArgs.model_validate(call.arguments)
        except ValidationError:
            return self.agent.execute(call)  # answered at once with the error, as one call at a time
        self.agent.record("tool_call", id=call.id, name=call.name, arguments=call.arguments,
                          raw_arguments=call.raw_arguments)
        scratch = procs.temp_dir("candidate")
        folder = Path(scratch.name) / "candidate"
        refused = unsafe_files.clear(self.ctx.workspace)
        try:  # what the candidate consists of, as regular files; the commit holds the same
            safe_files.copy_tree(self.ctx.workspace, folder, left_out)
        except safe_files.UnsafeFile as exc:  # planted since the clearing
            refused.append(exc)
            folder.mkdir(exist_ok=True)
        parent = self.follows if self.follows is not None else self.ctx.state.parent
        pending = Pending(index, call, args.rationale, folder, scratch, parent, content=content_hash(folder))
        if refused:
            pending.refused = unsafe_files.rejection(refused)
        else:
            pending.duplicate_of = self.ctx.lineage.find_duplicate(folder)
        if pending.duplicate_of is None and pending.refused is None:
            pending.duplicate_of = next((k for k, p in enumerate(self.pending)
                                         if p.duplicate_of is None and p.content == pending.content), None)
        if pending.duplicate_of is None and pending.refused is None:
            pending.future = self.ctx.evaluator.submit(folder)
        self.pending.append(pending)
        self.follows = len(self.pending) - 1
        return None

    def drain(self, results: list) -> None:
        """File every evaluation in flight, in call order."""
        if not self.pending:
            return
        checked_out = self.ctx.state.parent if self.follows is None else None
        for p in self.pending:
            # After a checkout that followed the last evaluate, the last result records that checkout's candidate
            # as the workspace's parent (what a resume reads), as it would one call at a time.
            last = p is self.pending[-1]
            results[p.index] = self.finish(p, checked_out if last else None)
        self.ctx.state.parent = checked_out or self.ctx.state.parent
        self.pending, self.follows = [], None

    def finish(self, p: Pending, workspace_parent: str | None = None) -> ToolResult:
        ctx = self.ctx

        # The workspace's parent just before this call, one call at a time: filing moves it to the new candidate;
        # a filing that fails leaves it there.
        ctx.state.parent = self.resolve_parent(p.parent)

        def work() -> tuple:
            if p.duplicate_of is not None:
                p.cid = self.resolve(p.duplicate_of)
                return answer_duplicate(ctx, p.cid)
            result = p.refused if p.refused is not None else p.future.result()
            content, data = file_result(ctx, p.folder, ctx.state.parent, p.rationale, result)
            p.cid = data["cid"]
            return content, data

        try:
            return self.agent.answer(p.call, work, workspace_parent)
        finally:
            p.scratch.cleanup()

    def resolve(self, ref: str | int | None) -> str | None:
        return self.pending[ref].cid if isinstance(ref, int) else ref

    def resolve_parent(self, ref: str | int | None) -> str | None:
        """The candidate a batched evaluation follows; where that one could not be filed, the one before it (as
        one call at a time, the workspace's parent would have stayed)."""
        while isinstance(ref, int):
            ref = self.pending[ref].cid if self.pending[ref].cid is not None else self.pending[ref].parent
        return ref
