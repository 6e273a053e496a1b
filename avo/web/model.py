"""What the web pages show, read from a run directory: nothing here writes to a run.

The run page reuses `gather` of avo/report/build.py (the same points, budget and provenance as `avo report`). The
candidate page adds what only the transcript knows: the agent's turns that led to a candidate, and the profile and
compile reports taken of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from avo.run.lineage.records import CID_PATTERN
from avo.replay.timeline import Marker, Step, build
from avo.replay.rebench import recorded_eval
from avo.web.diffs import diff_table

EDIT_TOOLS = frozenset({"edit_file", "write_file", "shell"})
REPORT_TOOLS = frozenset({"profile", "inspect_compile"})
_PREDICTED = re.compile(r"(?:expect(?:ed|s)?|predict(?:ed|s)?)\D{0,20}?([+-]?\d+(?:\.\d+)?)\s*(%|x\b)", re.I)


def run_status(state: str) -> str:
    """running / stopped / finished, as the runs page shows them (a run that says running but has no live holder of
    its lock was interrupted: stopped)."""
    return {"running": "running", "finished": "finished"}.get(state, "stopped")


def run_row(run) -> dict:
    """One row of the runs page."""
    row = run.summary()
    return {**row, "status": run_status(row["state"]), "started": str(row.get("started", ""))[:19]}


@dataclass
class Report:
    """A profile or compile report taken of a candidate (or of the working copy that became it)."""

    tool: str
    text: str
    of_working_copy: bool


@dataclass
class History:
    """Per candidate: the steps that led to it and the reports taken of it."""

    steps: dict[str, list[Step]] = field(default_factory=dict)
    reports: dict[str, list[Report]] = field(default_factory=dict)


def history(events: list[dict]) -> History:
    """Walk the transcript once. Steps since the previous evaluation belong to the candidate the next one commits; a
    profile taken while the workspace still held candidate X (checked out or just evaluated, not edited since) is X's,
    and one taken of an edited working copy belongs to the candidate that copy becomes."""
    found, pending, pending_reports, clean = History(), [], [], None
    for step in build(events)[1]:
        if isinstance(step, Marker):
            if step.kind == "baseline" and step.event.get("cid"):  # the workspace starts out holding the seed
                clean = step.event.get("workspace_parent") or step.event["cid"]
            continue
        pending.append(step)
        for call in step.calls:
            if call.content is None or call.is_error:
                continue
            data = call.data if isinstance(call.data, dict) else {}
            if call.name == "checkout" and data.get("cid"):
                clean = data["cid"]
            elif call.name in EDIT_TOOLS:
                clean = None
            elif call.name in REPORT_TOOLS:
                if clean is not None:
                    found.reports.setdefault(clean, []).append(Report(call.name, call.content, False))
                else:
                    pending_reports.append(Report(call.name, call.content, True))
            elif call.name == "evaluate" and data.get("cid"):
                cid = data.get("duplicate_of") or data["cid"]
                if not data.get("duplicate_of"):
                    found.steps[cid] = pending
                    found.reports.setdefault(cid, []).extend(pending_reports)
                pending, pending_reports, clean = [], [], cid
    return found


def predicted_gain(rationale: str) -> str | None:
    """The gain the rationale announced ("expect +32%", "predicts 1.2x"), as written; None when it states none."""
    match = _PREDICTED.search(rationale or "")
    if not match:
        return None
    number, unit = match.groups()
    return f"{number}{unit}" if unit == "x" else f"{'' if number[0] in '+-' else '+'}{number}%"


def measured_gain(fitness: float, parent_fitness: float | None) -> str | None:
    if not parent_fitness or not fitness:
        return None
    return f"{(fitness / parent_fitness - 1) * 100:+.1f}% ({fitness / parent_fitness:.3f}x)"


def candidate(run, cid: str, events_history: History) -> dict:
    """Everything the candidate page shows about `cid`."""
    lineage = run.lineage
    info = lineage.info(cid)
    result = recorded_eval(run, cid)
    parent = lineage.info(info.parent) if info.parent and CID_PATTERN.fullmatch(info.parent) else None
    best, baseline = lineage.best, lineage.baseline
    diffs = []
    if parent is not None:
        diffs.append((f"against its parent {parent.cid}", diff_table(lineage, parent.cid, cid)))
    if baseline and baseline != cid and (parent is None or baseline != parent.cid):
        diffs.append((f"against the baseline {baseline}", diff_table(lineage, baseline, cid)))
    rejected = None
    if result is not None and result.status != "correct":
        rejected = {"status": result.status, "rule": result.rule, "message": result.message}
    elif info.status != "correct":
        rejected = {"status": info.status, "rule": None, "message": ""}
    return {
        "info": info, "result": result, "parent": parent, "diffs": diffs, "rejected": rejected,
        "marks": [name for name, at in (("best", best), ("baseline", baseline)) if at == cid],
        "predicted": predicted_gain(info.rationale),
        "measured": measured_gain(info.fitness, parent.fitness if parent is not None else None),
        "files": lineage.files(cid), "steps": events_history.steps.get(cid, []),
        "reports": events_history.reports.get(cid, []),
    }
