"""The worker's per-call checks, in-process on the CPU: poisoned allocations, layout, unwritten, NaN, error."""

from __future__ import annotations

import pytest
import torch

from avo.evaluate.worker.correctness import (CaseFailure, checked_call, poison, poison_allocations, poisoned_mask,
                                      verify_output)
from avo.evaluate.guards import Rejection
from avo.tasks.gemm import GemmTask


def verify(out, ref, **kw):
    args = {"expected_shape": tuple(ref.shape), "expected_dtype": "float16", "device": ref.device,
            "tolerance": 0.002, "case": "c1"} | kw
    return verify_output(out, ref, **args)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_poison_is_a_nan_that_arithmetic_does_not_produce(dtype):
    t = torch.empty(5, dtype=dtype)
    poison(t)
    assert torch.isnan(t).all() and poisoned_mask(t).all()
    computed = torch.full((5,), float("nan"), dtype=dtype)
    assert torch.isnan(computed).all() and not poisoned_mask(computed).any()


def test_allocations_inside_the_mode_are_poisoned_and_only_there():
    ref = torch.ones(3, 3)
    with poison_allocations():
        made = [torch.empty(4, 4, dtype=torch.float16), torch.empty_like(ref), ref.new_empty((2,)),
                torch.empty_strided((2, 2), (1, 2))]
        zeros = torch.zeros(3)
    assert all(poisoned_mask(t).all() for t in made)
    assert (zeros == 0).all()


def test_verify_accepts_a_close_answer_and_returns_its_error():
    ref = torch.randn(8, 8, dtype=torch.float64)
    err = verify(ref.to(torch.float16), ref)
    assert 0 < err < 0.002


def test_unwritten_elements_are_named():
    ref = torch.randn(4, 4, dtype=torch.float64)
    out = ref.to(torch.float16)
    poison(out[2:, 1:])
    with pytest.raises(CaseFailure) as info:
        verify(out, ref)
    assert info.value.rule == "check.unwritten" and "6 of 16" in info.value.message and "(2, 1)" in info.value.message


def test_computed_nan_and_inf_are_nonfinite():
    ref = torch.randn(4, 4, dtype=torch.float64)
    out = ref.to(torch.float16)
    out[1, 1] = float("inf")
    out[0, 3] = float("nan")
    with pytest.raises(CaseFailure) as info:
        verify(out, ref)
    assert info.value.rule == "check.nonfinite" and "2 of 16" in info.value.message


def test_layout_shape_dtype_and_contiguity():
    ref = torch.randn(4, 6, dtype=torch.float64)
    for out in (ref.to(torch.float16)[:, :5], ref.to(torch.bfloat16), ref.to(torch.float16).t().contiguous().t()):
        with pytest.raises(CaseFailure) as info:
            verify(out, ref)
        assert info.value.rule == "check.output_layout"


def test_mismatch_names_case_error_and_tolerance():
    from avo.tasks import relative_error

    ref = torch.randn(16, 16, dtype=torch.float64)
    out = (ref * 1.01).to(torch.float16)
    with pytest.raises(CaseFailure) as info:
        verify(out, ref, case="7x33x17")
    assert info.value.rule == "check.mismatch"
    message = info.value.message
    assert "7x33x17" in message and "0.002" in message and f"relative error {relative_error(out, ref):.3g}" in message


def test_checked_call_poisons_the_candidates_output_and_watches_for_library_ops():
    task = GemmTask()
    case = task.cases("tiny")[1]
    inputs = task.make_inputs(case, 0, "cpu")
    forbidden = frozenset({"mm"})
    out = checked_call(task, case, lambda a, b: torch.empty(a.shape[0], b.shape[1], dtype=a.dtype), inputs,
                       forbidden, "cpu")
    assert poisoned_mask(out).all()
    with pytest.raises(Rejection) as info:
        checked_call(task, case, lambda a, b: torch.mm(a, b), inputs, forbidden, "cpu")
    assert info.value.rule == "runtime.library_op"
