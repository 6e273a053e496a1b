"""What a check output is judged by, wherever the judge runs: avo's (avo/evaluate/judge.py), or the in-process one
of scripts that have no parent (references.LocalJudge). The checks themselves are correctness.verify_values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from avo.evaluate import frames


@dataclass
class RefCase:
    """One check case as the producer computed it: its reference and what the comparison needs with it."""

    index: int
    name: str
    label: str
    tolerance: float
    out_shape: list[int]
    out_dtype: str
    tensor: Any
    library_rel_err: float | None = None


def ref_case(header: dict, payload: bytes) -> RefCase:
    """A reference as its frame carried it."""
    return ref_from(header, frames.tensor_from(payload, header["dtype"], header["shape"]))


def ref_from(header: dict, tensor: Any) -> RefCase:
    """A reference from its producer's header and tensor (references.references)."""
    return RefCase(index=header["index"], name=header["case"], label=header["label"], tolerance=header["tolerance"],
                   out_shape=list(header["out_shape"]), out_dtype=header["out_dtype"], tensor=tensor,
                   library_rel_err=header.get("library_rel_err"))


def compare(ref: RefCase, header: dict, payload: bytes) -> dict:
    """The verdict on one output: {index, correct, rel_err, library_rel_err, rule, message}."""
    from avo.evaluate.worker.correctness import CaseFailure, verify_values
    from avo.tasks.base import relative_error

    verdict = {"index": ref.index, "correct": False, "rel_err": None, "library_rel_err": ref.library_rel_err,
               "rule": None, "message": None}
    if list(header.get("shape") or []) != ref.out_shape or header.get("dtype") != ref.out_dtype:
        verdict.update(rule="check.output_layout", message=(
            f"case {ref.label}: output is {tuple(header.get('shape') or ())} {header.get('dtype')}, expected "
            f"{tuple(ref.out_shape)} {ref.out_dtype}"))
        return verdict
    out = frames.tensor_from(payload, ref.out_dtype, ref.out_shape)
    try:
        verdict.update(correct=True, rel_err=verify_values(out, ref.tensor, tolerance=ref.tolerance, case=ref.label))
    except CaseFailure as failure:
        verdict.update(rule=failure.rule, message=failure.message)
        if failure.rule == "check.mismatch":
            verdict["rel_err"] = relative_error(out, ref.tensor)
    return verdict
