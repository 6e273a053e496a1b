"""A candidate folder that holds something other than regular files: a symlink, hard link, FIFO, socket or device,
planted by a candidate while it ran (or by an earlier one). The candidate is recorded as `rejected`, with what was
found, and those entries are removed from the folder (their names only: a link's target is left as it was), so the
run goes on from the folder's regular files instead of refusing every later candidate of it.
"""

from __future__ import annotations

from pathlib import Path

from avo.evaluate.result import EvalResult
from avo.run.lineage.records import left_out
from avo.util import safe_files
from avo.util.safe_files import UnsafeFile

RULE = "files.unsafe"


def clear(folder: Path) -> list[UnsafeFile]:
    """Remove the entries of `folder` that a candidate may not hold (never opened); what they were."""
    _, refused = safe_files.scan(Path(folder), left_out)
    for entry in refused:
        safe_files.remove(Path(folder), entry.rel)
    return refused


def rejection(refused: list[UnsafeFile]) -> EvalResult:
    found = "; ".join(f"{entry.rel} is {entry.what}" for entry in refused)
    return EvalResult(status="rejected", rule=RULE,
                      message=f"{RULE}: the candidate folder held {found}. A candidate is regular files only; "
                              "avo removed those entries (their names, not what they point to) and evaluated nothing "
                              "of this candidate.")


def screened(folder: Path, result: EvalResult) -> EvalResult:
    """`result`, or the rejection of a folder that holds unsafe entries now (they are removed)."""
    refused = clear(folder)
    return rejection(refused) if refused else result
