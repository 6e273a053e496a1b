"""The attention task: suites, inputs, FLOP counts, the chunked reference and the tolerance that separates fp8."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from avo.errors import UserError
from avo.tasks import Task, load, relative_error
from avo.tasks.attention import AttentionTask, attention_reference

task = AttentionTask()


def naive_attention(q, k, v, causal, sm_scale):
    """One head at a time in float64, with an explicit mask: the textbook formula, independent of the task's code."""
    b, hq, s, d = q.shape
    group = hq // k.shape[1]
    out = torch.empty((b, hq, s, d), dtype=torch.float64)
    for bi in range(b):
        for h in range(hq):
            qh = q[bi, h].double()
            kh = k[bi, h // group].double()
            vh = v[bi, h // group].double()
            scores = qh @ kh.T * sm_scale
            if causal:
                scores[torch.ones(s, s, dtype=torch.bool).triu(1)] = -math.inf
            out[bi, h] = torch.softmax(scores, dim=-1) @ vh
    return out


def honest_kernel(q, k, v, causal, sm_scale):
    """What a correct bf16/fp16 kernel computes: fp32 scores and sums, P rounded to the input dtype for PV."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    scores = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    if causal:
        s = q.shape[2]
        scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), -math.inf)
    p = torch.exp(scores - scores.amax(-1, keepdim=True))
    return ((p.to(q.dtype).float() @ v.float()) / p.sum(-1, keepdim=True)).to(q.dtype)


def fp8_kernel(q, k, v, causal, sm_scale):
    """A shortcut through float8_e4m3fn: exact math on inputs that went through fp8."""
    q8, k8, v8 = (t.to(torch.float8_e4m3fn).to(t.dtype) for t in (q, k, v))
    return naive_attention(q8, k8, v8, causal, sm_scale).to(q.dtype)


def test_is_a_task_and_registered():
    assert isinstance(task, Task)
    assert isinstance(load("attention"), AttentionTask)
    assert task.entry == "attention"


def test_bench_suite_is_the_paper_suite():
    cases = task.cases("bench")
    assert len(cases) == 24
    assert len({c.name for c in cases}) == 24
    seen = set()
    for c in cases:
        p = c.params
        assert p["D"] == 128 and p["B"] * p["S"] == 32768 and c.dtype == "bfloat16"
        seen.add((p["Hq"], p["Hkv"], p["S"], p["causal"]))
    assert seen == {(hq, hkv, s, causal) for hq, hkv in ((16, 16), (32, 8), (32, 4))
                    for s in (4096, 8192, 16384, 32768) for causal in (False, True)}


def test_wide_suite_is_the_shapes_models_run():
    cases = task.cases("wide")
    assert len({c.name for c in cases}) == len(cases) == 48
    seen = set()
    for c in cases:
        p = c.params
        assert p["B"] * p["S"] == 32768 and c.dtype == "bfloat16"
        seen.add((p["D"], p["Hq"], p["Hkv"], p["S"], p["causal"]))
    assert seen == {(d, hq, hkv, s, causal) for d in (64, 128) for hq, hkv in ((16, 16), (32, 8))
                    for s in (512, 1024, 2048, 4096, 8192, 16384) for causal in (False, True)}


def test_check_suite_covers_the_edges():
    cases = task.cases("check")
    params = [c.params for c in cases]
    seqlens = {p["S"] for p in params}
    assert 1 in seqlens and all(s == 1 or s % 16 for s in seqlens)
    assert any(p["Hq"] != p["Hkv"] for p in params)
    assert {p["causal"] for p in params} == {False, True}
    assert {p["D"] for p in params} == {64, 128}
    assert {c.dtype for c in cases} == {"bfloat16", "float16"}
    assert any(p["magnitude"] > 1 for p in params)


def test_tiny_suite_is_fp16_and_has_the_edges():
    cases = task.cases("tiny")
    assert {c.dtype for c in cases} == {"float16"}
    params = [c.params for c in cases]
    assert any(p["S"] == 1 for p in params) and any(p["S"] % 16 for p in params)
    assert any(p["Hq"] != p["Hkv"] for p in params) and any(p["causal"] for p in params)
    assert max(p["S"] for p in params) > 128


def test_unknown_suite_is_a_user_error():
    with pytest.raises(UserError):
        task.cases("huge")
    with pytest.raises(UserError):
        task.tolerance("float8_e4m3fn")


def test_flops_and_bytes():
    case = next(c for c in task.cases("bench") if c.params["S"] == 4096 and c.params["Hq"] == 16)
    assert case.params["B"] == 8
    full = 4 * 8 * 16 * 4096 * 4096 * 128
    causal = next(c for c in task.cases("bench") if c.params == {**case.params, "causal": True})
    assert task.flops(case) == full and task.flops(causal) == full / 2
    assert task.bytes(case) == 2 * 8 * 4096 * 128 * (16 + 16 + 16 + 16)


def test_inputs_are_seeded_nonzero_and_shaped():
    case = next(c for c in task.cases("check") if c.params["Hq"] != c.params["Hkv"] and c.params["S"] > 1)
    q, k, v, causal, sm_scale = task.make_inputs(case, 7, "cpu")
    p = case.params
    assert q.shape == (p["B"], p["Hq"], p["S"], p["D"]) and k.shape == v.shape == (p["B"], p["Hkv"], p["S"], p["D"])
    assert q.dtype == getattr(torch, case.dtype) and causal == p["causal"]
    assert sm_scale == pytest.approx(1 / math.sqrt(p["D"]))
    assert all(bool(t.abs().sum() > 0) for t in (q, k, v))
    again = task.make_inputs(case, 7, "cpu")
    other = task.make_inputs(case, 8, "cpu")
    assert torch.equal(q, again[0]) and not torch.equal(q, other[0])
    assert task.output_like(case, (q, k, v, causal, sm_scale)) == (tuple(q.shape), case.dtype)


def test_large_magnitude_case_overflows_a_softmax_without_max_subtraction():
    case = next(c for c in task.cases("check") if c.params["magnitude"] > 1)
    q, k, _, _, sm_scale = task.make_inputs(case, 0, "cpu")
    logits = q[0, 0].float() @ k[0, 0].float().T * sm_scale
    assert float(logits.max()) > 88.7  # exp() of this is inf in float32


@pytest.mark.parametrize("suite", ["check", "tiny"])
def test_reference_matches_the_textbook_formula(suite):
    for case in task.cases(suite):
        if case.params["S"] > 300:
            continue  # the per-head loop is slow at S = 1000; shorter cases cover the same code paths
        inputs = task.make_inputs(case, 3, "cpu")
        ref = task.reference(*inputs)
        assert ref.dtype == torch.float64
        assert relative_error(ref, naive_attention(*inputs)) < 1e-12, case.name


@pytest.mark.parametrize("causal", [False, True])
def test_chunked_reference_equals_unchunked(causal):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn((2, 8, 75, 64), generator=g) for _ in range(3))
    k, v = k[:, :2].contiguous(), v[:, :2].contiguous()
    whole = attention_reference(q, k, v, causal, 0.125, chunk_elements=1 << 30)
    for chunk_elements in (1, 2 * 8 * 75 * 7, 2 * 8 * 75 * 32):
        chunked = attention_reference(q, k, v, causal, 0.125, chunk_elements=chunk_elements)
        assert torch.allclose(chunked, whole, rtol=0, atol=1e-13)


def test_tolerance_passes_honest_kernels_and_rejects_fp8():
    for case in task.cases("check") + task.cases("tiny"):
        if case.params["S"] == 1 or case.params["S"] > 300:
            continue  # S = 1: softmax is exactly 1, only v's rounding shows; S = 1000: slow, adds nothing
        inputs = task.make_inputs(case, 11, "cpu")
        ref = task.reference(*inputs)
        tol = task.tolerance(case.dtype)
        honest = relative_error(honest_kernel(*inputs), ref)
        cheat = relative_error(fp8_kernel(*inputs), ref)
        assert honest < tol / 3, (case.name, honest, tol)
        assert cheat > 2 * tol, (case.name, cheat, tol)


def test_library_on_cpu_is_within_tolerance():
    case = next(c for c in task.cases("check") if c.params["Hq"] != c.params["Hkv"] and c.params["causal"])
    inputs = task.make_inputs(case, 5, "cpu")
    out = task.library(*inputs)
    assert out.shape == inputs[0].shape and out.dtype == inputs[0].dtype
    assert relative_error(out, task.reference(*inputs)) < task.tolerance(case.dtype)
    assert task.library_name()


def test_default_seed_is_shipped():
    assert (Path(task.default_seed()) / "kernel.py").is_file()


@pytest.mark.gpu
def test_library_and_reference_agree_on_gpu():
    for case in task.cases("check"):
        inputs = task.make_inputs(case, 2, "cuda")
        ref = task.reference(*inputs)
        assert ref.dtype == torch.float32
        cpu_ref = task.reference(*(t.cpu() if torch.is_tensor(t) else t for t in inputs))
        assert relative_error(ref.cpu(), cpu_ref) < 1e-5, case.name
        err = relative_error(task.library(*inputs), ref)
        assert err < task.tolerance(case.dtype), (case.name, task.library_name(), err)


@pytest.mark.gpu
def test_timed_reference_is_close_to_the_exact_one_on_bench_shapes():
    """The library output stands in for the exact reference in the spot checks after timing: it must stay well
    inside the tolerance (the docstring of timed_reference says within 0.003 of 0.01)."""
    cases = task.cases("bench")
    for case in (cases[0], cases[1], cases[-1]):
        inputs = task.make_inputs(case, 5, "cuda")
        err = relative_error(task.timed_reference(*inputs), task.reference(*inputs))
        assert err < 0.003, (case.name, err)
        del inputs


@pytest.mark.gpu
def test_tf32_reference_matches_float32_on_cuda_cores():
    """The TF32 path (16-bit inputs on CUDA) against the same computation with TF32 off (float32 inputs)."""
    for case in (task.cases("check")[8], task.cases("bench")[1]):
        q, k, v, causal, scale = task.make_inputs(case, 6, "cuda")
        fast = attention_reference(q, k, v, causal, scale)
        slow = attention_reference(q.float(), k.float(), v.float(), causal, scale)
        assert relative_error(fast, slow) < 1e-5, case.name
        del q, k, v, fast, slow
