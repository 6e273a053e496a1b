"""Candidates that fault the GPU: a CUDA illegal address and an out-of-memory. Each is a failed evaluation with the
cause in its message, the run goes on, and the next evaluation on the same GPU is normal (a fresh process, a fresh
CUDA context). Needs an NVIDIA GPU; skipped without one."""

from __future__ import annotations

from pathlib import Path

import pytest

from avo.config import EvalConfig
from avo.evaluate.harness import Evaluator

KERNELS = Path(__file__).parent / "kernels"

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu_evaluator():
    from avo.gpus import resolve

    return Evaluator("gemm", device="cuda", gpu=resolve("auto", "cuda"), config=EvalConfig(seed=1))


@pytest.mark.parametrize("folder, phrases", [
    ("illegal_address", ("illegal memory access", "an illegal address")),
    ("out_of_memory", ("out of memory",)),
])
def test_a_gpu_fault_fails_the_candidate_and_the_next_evaluation_is_normal(gpu_evaluator, folder, phrases):
    faulty = gpu_evaluator.evaluate(KERNELS / folder)
    assert faulty.status in ("crash", "incorrect") and faulty.fitness == 0, faulty.message
    assert any(p in faulty.message.lower() for p in phrases), faulty.message
    after = gpu_evaluator.evaluate(KERNELS / "good_gemm")
    assert after.status == "correct" and after.fitness > 0, after.message
    assert all(c.correct for c in after.cases)
