"""The offline agent: a profile-guided search over a kernel's `# avo: tune` knobs, driven through the same tools an
LLM would call (lineage, checkout, read_file, edit_file, evaluate, profile), each step with a rationale a person can
read in the transcript and the lineage.

It keeps no state of its own between turns: each turn replays the conversation (see heuristic/history.py), so a
transcript replays identically and a restarted conversation picks up from the lineage.
"""

from __future__ import annotations

import hashlib
import re

from avo.agent.buckets import bucket_head_dims
from avo.agent.heuristic.facts import facts_from
from avo.agent.heuristic.history import KERNEL, History, point_from_text, text_hash
from avo.agent.heuristic.knobs import KnobError, format_point, parse_knobs, render
from avo.agent.heuristic.rules import DEFAULT_SMEM_PER_BLOCK, Shape, fixed_roles, roles
from avo.agent.heuristic.measured import change_losses, winning_parts
from avo.agent.heuristic.search import Search, Trial
from avo.agent.models.base import Message, ToolCall, ToolSpec, Turn
from avo.agent.stops import ModelExhausted
from avo.util.format import headline

LINEAGE_LIMIT = 100
"""Rows to read after a restart: their knob tags keep the search from proposing them again. Older points may come
up again; the evaluate tool answers those from the lineage without re-running them (duplicate_of)."""
SAME_FAILURE_LIMIT = 6
"""Candidates, the seed included, that must all fail the same way before the search gives up on the knobs."""
MAX_PROFILES = 3
"""A profile costs ~10 s of ncu: enough to re-orient after the first few new bests, not after every small step."""


class HeuristicModel:
    name = "heuristic"

    def __init__(self, seed: int = 0):
        self.seed = seed
        self._turn_index = 0

    def next_turn(self, system: str, messages: list[Message], tools: list[ToolSpec]) -> Turn:
        if not tools:  # a supervisor review: the search already moves on by itself when a line stops paying
            return self._turn("The heuristic search is best-first over untried knob moves around the best kernel; "
                              "it moves on from a dimension once its neighbours are measured and stops when every "
                              "single and pairwise move has been tried.")
        h = History.replay(messages)
        self._turn_index = len(messages)
        offered = {t.name for t in tools}
        if h.finished:
            raise ModelExhausted("the heuristic search has tried every move it knows from the best kernel")
        if "lineage" in offered and h.calls["lineage"] == 0:
            return self._turn("Orient: list what the lineage already holds, so no point is measured twice.",
                              ("lineage", {"limit": LINEAGE_LIMIT}))
        if h.errors["read_file"] >= 3:
            raise ModelExhausted(f"{KERNEL} cannot be read from the workspace")
        for cid, why in _sources_to_learn(h):
            if h.workspace_cid != cid and h.errors["checkout"] < 3:
                return self._turn(why, ("checkout", {"cid": cid}))
            if h.workspace_cid == cid:
                return self._turn(f"Observe: read {KERNEL} of {cid} and its `# avo: tune` knobs.",
                                  ("read_file", {"path": KERNEL}))
        if h.text is None:
            return self._turn(f"Observe: read {KERNEL} and its `# avo: tune` knobs.", ("read_file", {"path": KERNEL}))
        return self._plan(system, h, offered)

    def _plan(self, system: str, h: History, offered: set[str]) -> Turn:
        base_text = h.texts.get(h.best_cid or "") or h.texts.get(h.baseline_cid or "") or _first_text(h)
        knobs = parse_knobs(base_text)
        if not knobs:
            return self._done("kernel.py has no `# avo: tune` knobs, so there is nothing for the heuristic agent to "
                              "tune; run with an LLM agent to rewrite it")
        search = self._search(system, h, knobs, base_text)
        hopeless = _same_failure_everywhere(h)
        if hopeless:
            return self._done(hopeless)
        current = point_from_text(h.text)

        # Act on the edits already made: evaluate them (never the same source twice).
        if current is not None and not search.tried(current) and text_hash(h.text) not in h.evaluated_hashes:
            if h.workspace_cid is None or not h.outcomes and not h.lineage_outcomes():
                why = h.last_edit_rationale or "Baseline: measure the seed as it is."
                return self._turn(why, ("evaluate", {"rationale": f"{why} {format_point(current)}"}))

        workers = _workers(system)
        moves = search.next_moves(workers)  # the first is `next_move()`; the rest fill the other workers
        move = moves[0] if moves else None
        # A jump to a known-good configuration does not depend on the profile; fine moves do.
        profile = self._profile_calls(system, h, offered) if move is not None and move.kind != "preset" else []
        if profile:
            return self._turn(f"Observe: profile the best kernel {h.best_cid} to see what limits it now.", *profile)
        if move is None:
            done = len(search.trials)
            failed = sum(t.status != "correct" for t in search.trials.values())
            return self._done(f"every single and pairwise knob move around the best has been tried ({done} points, "
                              f"{failed} invalid); best {h.best_cid or '-'} fitness {search.incumbent_fitness:.3f} "
                              f"at {format_point(search.incumbent)}")
        if workers > 1 and h.best_cid and h.errors["checkout"] < 3:
            return self._batch(h, base_text, moves)
        if h.best_cid and h.workspace_cid != h.best_cid and h.errors["checkout"] < 3:
            return self._turn(f"Back to the best, {h.best_cid} (fitness {h.best_fitness:.3f}), before the next move.",
                              ("checkout", {"cid": h.best_cid}))
        # Every point is rendered from the best kernel's source, so stray edits in the workspace are undone too.
        return self._turn(move.describe(), *_edits(h.text, render(base_text, move.point)))

    def _search(self, system: str, h: History, knobs, base_text: str) -> Search:
        kind = _task_kind(system, base_text)
        # A table entry no timed case takes cannot move the fitness: only the entries the workload's cases take (as
        # the results say) are tuned, beside the shared knobs.
        taken = {b for o in h.all_outcomes() for b in o.buckets}
        if taken:
            knobs = [k for k in knobs if k.bucket is None or k.bucket in taken]
        shape = Shape(kind=kind, roles=roles(knobs), smem_limit=_smem_limit(system),
                      fixed=fixed_roles(base_text, knobs), arch=_arch(system))
        incumbent = point_from_text(base_text) or {}
        # Lines are independent, so a point can be written iff each of its values can.
        unwritable = {(k.name, v) for k in knobs for v in k.choices if not _renders(base_text, {k.name: v})}
        search = Search(knobs=knobs, shape=shape, incumbent=incumbent, incumbent_fitness=h.best_fitness,
                        seed=self.seed, buckets=sorted(taken),
                        head_dims=bucket_head_dims(base_text) if kind == "attention" else {},
                        renders=lambda point: not any(item in unwritable for item in point.items()))
        for outcome in h.all_outcomes():
            if outcome.point is not None and set(outcome.point) == set(incumbent):
                search.record(Trial(point=outcome.point, status=outcome.status, fitness=outcome.fitness,
                                    accepted=outcome.accepted, cid=outcome.cid, message=outcome.message))
        measured = [o for o in h.per_candidate() if o.point is not None and set(o.point) == set(incumbent)]
        search.losses = change_losses(measured)
        search.splits = winning_parts(measured, knobs)
        if len(h.accepted_points) >= 2:
            before, after = h.accepted_points[-2], h.accepted_points[-1]
            search.last_accepted = {k: (before[k], v) for k, v in after.items() if before.get(k) != v}
        accepted_cids = [o.cid for o in h.all_outcomes() if o.accepted]
        profile, compile_info = h.profile_of([h.best_cid, *reversed(accepted_cids), h.baseline_cid])
        if profile or compile_info:
            search.facts = facts_from(profile, compile_info)
        return search

    def _batch(self, h: History, base_text: str, moves: list) -> Turn:
        """One move per worker in one turn: each from the best (a checkout of its id between them), edited and
        evaluated; the evaluations run at once and are filed in this order (agent/batch.py)."""
        calls: list[tuple[str, dict]] = []
        text, at_best = h.text, h.workspace_cid == h.best_cid
        for move in moves:
            if not at_best:
                calls.append(("checkout", {"cid": h.best_cid}))
                text = base_text
            target = render(base_text, move.point)
            calls += _edits(text or base_text, target)
            calls.append(("evaluate", {"rationale": f"{move.describe()} {format_point(move.point)}"}))
            text, at_best = target, False
        lead = f"{len(moves)} moves at once, one per worker, each from the best {h.best_cid}: "
        return self._turn(lead + "; ".join(move.describe() for move in moves), *calls)

    def _profile_calls(self, system: str, h: History, offered: set[str]) -> list[tuple[str, dict]]:
        """Profile the best kernel once per new best, on a GPU only, while the profiler answers."""
        if "interpreter" in system.lower() or not h.best_cid or h.workspace_cid != h.best_cid:
            return []
        calls = []
        taken = {cid for cid, _ in h.profiles}
        if "profile" in offered and not h.errors["profile"] and h.best_cid not in taken \
                and len(h.profiles) < MAX_PROFILES:
            calls.append(("profile", {"case": 0}))
        compiled = {cid for cid, _ in h.compiles}
        if "inspect_compile" in offered and not h.errors["inspect_compile"] and h.best_cid not in compiled \
                and len(h.compiles) < MAX_PROFILES:
            calls.append(("inspect_compile", {}))
        return calls

    def _done(self, why: str) -> Turn:
        return self._turn(f"Done: {why}.")

    def _turn(self, text: str, *calls: tuple[str, dict]) -> Turn:
        tool_calls = [ToolCall(id=f"h{self._turn_index}_{i}_{_call_id(text, name, args)}", name=name, arguments=args)
                      for i, (name, args) in enumerate(calls)]
        return Turn(text=text, tool_calls=tool_calls, model=self.name, stop_reason="tool_use" if calls else "end_turn")


def _edits(text: str, target: str) -> list[tuple[str, dict]]:
    """edit_file calls, one per changed line, when each old line is unique; otherwise one write_file."""
    old_lines, new_lines = text.splitlines(), target.splitlines()
    if len(old_lines) != len(new_lines):
        return [("write_file", {"path": KERNEL, "content": target})]
    edits = []
    for old, new in zip(old_lines, new_lines):
        if old != new:
            if text.count(old) != 1:
                return [("write_file", {"path": KERNEL, "content": target})]
            edits.append(("edit_file", {"path": KERNEL, "old": old, "new": new}))
    return edits


def _sources_to_learn(h: History) -> list[tuple[str, str]]:
    """Candidates whose kernel.py must be read before searching: the baseline (its rationale carries no knob point,
    so only its source tells which point it is) and, last, the best, where the search starts."""
    start = h.best_cid or h.baseline_cid
    wanted = []
    base = h.baseline_cid
    if base and base != start and base not in h.texts:
        tagged = any(o.cid == base and o.point is not None for o in h.lineage_outcomes())
        if not tagged:
            wanted.append((base, f"Look at the baseline {base} first, so its point is never proposed again."))
    if start and start not in h.texts:
        wanted.append((start, f"Start from {start}, the best candidate so far."))
    return wanted


def _renders(text: str, point) -> bool:
    try:
        render(text, point)
    except KnobError:
        return False
    return True


def _same_failure_everywhere(h: History) -> str | None:
    """Why tuning cannot help, when the seed and every knob setting since fail the same way (a broken environment
    or a wrong kernel, which no tile size fixes)."""
    outcomes = h.per_candidate()
    statuses = {o.status for o in outcomes}
    if len(outcomes) < SAME_FAILURE_LIMIT or len(statuses) != 1 or "correct" in statuses:
        return None
    last = headline(outcomes[-1].message)
    return (f"the seed and all {len(outcomes) - 1} knob settings tried ended in {statuses.pop()}, so the knobs are not "
            f"the problem; fix the kernel or the environment first (last: {last[:160] or '-'})")


def _first_text(h: History) -> str:
    return next(iter(h.texts.values()), h.text or "")


def _task_kind(system: str, source: str) -> str:
    entry = re.search(r"must define `(\w+)`", system)
    name = entry.group(1) if entry else ""
    if name == "attention" or (not name and re.search(r"^def attention\(", source, re.M)):
        return "attention"
    return "gemm"


def _smem_limit(system: str) -> int:
    found = re.search(r"(\d+)\s*KB shared memory per block", system)
    return int(found.group(1)) * 1024 if found else DEFAULT_SMEM_PER_BLOCK


def _workers(system: str) -> int:
    """How many evaluations run at once, as the system prompt says (agent/context.py's workers note); 1 if silent."""
    found = re.search(r"^(\d+) evaluation workers", system, re.M)
    return int(found.group(1)) if found else 1


def _arch(system: str) -> str:
    """The compile target the system prompt names for the GPU (`B200 (sm_100a, ...`), Hopper's when none."""
    found = re.search(r"\((sm_\d+a?), compute capability", system)
    return found.group(1) if found else "sm_90a"


def _call_id(text: str, name: str, args: dict) -> str:
    return hashlib.sha256(f"{text}|{name}|{sorted(args.items())!r}".encode()).hexdigest()[:8]

