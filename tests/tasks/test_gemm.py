"""The GEMM task: suites, inputs, FLOP counts, the reference and the tolerance that separates fp8."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from avo.errors import UserError
from avo.tasks import Task, load, relative_error
from avo.tasks.gemm import GemmTask

task = GemmTask()


def naive_gemm(a, b):
    """Row by row in float64: the textbook product, independent of the task's code."""
    a64, b64 = a.double(), b.double()
    return torch.stack([(a64[i][:, None] * b64).sum(0) for i in range(a64.shape[0])])


def fp8_gemm(a, b):
    return (a.to(torch.float8_e4m3fn).double() @ b.to(torch.float8_e4m3fn).double()).to(a.dtype)


def test_is_a_task_and_registered():
    assert isinstance(task, Task)
    assert isinstance(load("gemm"), GemmTask)
    assert task.entry == "gemm"


def test_bench_suite_shapes():
    shapes = [(c.params["M"], c.params["N"], c.params["K"]) for c in task.cases("bench")]
    assert shapes == [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 14336, 4096), (16384, 4096, 4096)]
    assert {c.dtype for c in task.cases("bench")} == {"bfloat16"}


def test_wide_suite_is_a_70b_models_linear_layers_at_five_token_counts():
    shapes = {(c.params["M"], c.params["N"], c.params["K"]) for c in task.cases("wide")}
    layers = {(10240, 8192), (8192, 8192), (57344, 8192), (8192, 28672)}
    assert shapes == {(m, n, k) for m in (64, 256, 1024, 4096, 16384) for n, k in layers}
    assert len(task.cases("wide")) == 20 and {c.dtype for c in task.cases("wide")} == {"bfloat16"}


def test_check_suite_covers_the_edges():
    params = [c.params for c in task.cases("check")]
    dims = {p[d] for p in params for d in "MNK"}
    assert {1, 7, 33, 127, 255, 1000} <= dims
    assert any(p["M"] >= 32 * p["N"] or p["N"] >= 32 * p["M"] for p in params)  # tall or wide and skinny
    assert any(p["K"] % 16 and p["K"] > 256 for p in params)  # K crosses several tiles, ragged at the end


def test_tiny_suite_is_fp16():
    cases = task.cases("tiny")
    assert {c.dtype for c in cases} == {"float16"}
    assert any(c.params["M"] == 1 for c in cases)


def test_unknown_suite_and_dtype_are_user_errors():
    with pytest.raises(UserError):
        task.cases("nope")
    with pytest.raises(UserError):
        task.tolerance("float32")


def test_flops_and_bytes():
    case = task.cases("bench")[2]
    assert task.flops(case) == 2 * 8192 * 14336 * 4096
    assert task.bytes(case) == 2 * (8192 * 4096 + 4096 * 14336 + 8192 * 14336)


def test_inputs_are_seeded_and_nonzero():
    case = task.cases("check")[3]
    a, b = task.make_inputs(case, 1, "cpu")
    assert a.shape == (case.params["M"], case.params["K"]) and b.shape == (case.params["K"], case.params["N"])
    assert a.dtype == b.dtype == torch.bfloat16
    assert bool(a.abs().sum() > 0) and bool(b.abs().sum() > 0)
    assert torch.equal(a, task.make_inputs(case, 1, "cpu")[0])
    assert not torch.equal(a, task.make_inputs(case, 2, "cpu")[0])
    assert task.output_like(case, (a, b)) == ((case.params["M"], case.params["N"]), "bfloat16")


@pytest.mark.parametrize("suite", ["check", "tiny"])
def test_reference_matches_the_textbook_product(suite):
    for case in task.cases(suite):
        if case.params["M"] * case.params["N"] * case.params["K"] > 1 << 24:
            continue  # the row loop is slow; these sizes add nothing the others do not check
        inputs = task.make_inputs(case, 3, "cpu")
        ref = task.reference(*inputs)
        assert ref.dtype == torch.float64
        assert relative_error(ref, naive_gemm(*inputs)) < 1e-12, case.name


def test_tolerance_passes_honest_kernels_and_rejects_fp8():
    for case in task.cases("check") + task.cases("tiny"):
        if case.params["M"] * case.params["N"] < 64:
            continue  # a handful of outputs: the fp8 error is too noisy to bound from one draw
        a, b = task.make_inputs(case, 11, "cpu")
        ref = task.reference(a, b)
        tol = task.tolerance(case.dtype)
        honest = relative_error((a.float() @ b.float()).to(a.dtype), ref)
        cheat = relative_error(fp8_gemm(a, b), ref)
        assert honest < tol / 3, (case.name, honest, tol)
        assert cheat > 2 * tol, (case.name, cheat, tol)


def test_library_on_cpu_is_within_tolerance():
    case = task.cases("check")[2]
    a, b = task.make_inputs(case, 5, "cpu")
    assert relative_error(task.library(a, b), task.reference(a, b)) < task.tolerance(case.dtype)
    assert task.library_name()


def test_default_seed_is_shipped():
    assert (Path(task.default_seed()) / "kernel.py").is_file()


@pytest.mark.gpu
def test_library_and_reference_agree_on_gpu():
    for case in task.cases("check"):
        a, b = task.make_inputs(case, 2, "cuda")
        ref = task.reference(a, b)
        assert ref.dtype == torch.float32
        assert relative_error(ref.cpu(), task.reference(a.cpu(), b.cpu())) < 1e-5, case.name
        assert relative_error(task.library(a, b), ref) < task.tolerance(case.dtype), case.name
