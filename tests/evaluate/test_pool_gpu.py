"""The run's pool on a GPU (`pytest -m gpu`): a worker prepared ahead scores as a cold one does, and `--gpus all`
gives one worker per GPU. Per-candidate wall times, before and after, come from `scripts/gpu_validate.sh evalwall`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from avo.config import EvalConfig, PoolConfig
from avo.evaluate.harness import Evaluator
from avo.evaluate.pool import make_pool, visible_gpus

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "kernels" / "gemm" / "triton_tiled"


@pytest.mark.gpu
def test_a_prepared_worker_scores_the_gemm_seed_as_a_cold_one_does():
    from avo.gpus import resolve

    gpu = resolve("auto", "cuda")
    cold = Evaluator("gemm", device="cuda", gpu=gpu, config=EvalConfig()).evaluate(SEED)
    pool = make_pool("gemm", device="cuda", gpu=gpu, config=EvalConfig(), pool=PoolConfig())
    try:
        pool.evaluate(SEED)  # learns the reference's ops; its slot prepares the next worker
        slot = pool.slots[0]
        assert slot._spares and slot._spares[0].ready(300)
        began = time.monotonic()
        warm = pool.evaluate(SEED)
        wall = time.monotonic() - began
    finally:
        pool.close()
    print(f"gemm seed: cold {cold.wall_s:.1f} s fitness {cold.fitness:.4f}; prepared {wall:.1f} s fitness "
          f"{warm.fitness:.4f} stages {warm.stage_s}")
    assert cold.status == warm.status == "correct", (cold.message, warm.message)
    assert warm.stage_s["waited"] < 0.5 and warm.worker.startswith("gpu ")
    assert abs(warm.fitness / cold.fitness - 1) < 0.05, "a prepared worker changed the score"


@pytest.mark.gpu
def test_gpus_all_gives_one_pinned_worker_per_gpu():
    from avo.gpus import resolve

    gpus = visible_gpus()
    pool = make_pool("gemm", device="cuda", gpu=resolve("auto", "cuda"), config=EvalConfig(bench_suite=""),
                     pool=PoolConfig(gpus="all"))
    try:
        assert pool.size == len(gpus)
        assert [slot.env["CUDA_VISIBLE_DEVICES"] for slot in pool.slots] == gpus
        futures = [pool.submit(SEED) for _ in gpus]
        results = [f.result() for f in futures]
    finally:
        pool.close()
    assert all(r.status == "correct" for r in results), [r.message for r in results]
    assert sorted(r.worker for r in results) == sorted(f"gpu {g}" for g in gpus)


@pytest.mark.gpu
def test_the_next_worker_sets_up_beside_an_evaluation_whose_score_stays_that_of_a_cold_one():
    """Back to back, the fourth evaluation finds its worker set up: let go as the second ended, it set up beside
    the third, whose timing waited for it (the check verdicts held). The third, timed after that set-up, scores as a
    cold worker does."""
    from avo.gpus import resolve

    gpu = resolve("auto", "cuda")
    cold = Evaluator("gemm", device="cuda", gpu=gpu, config=EvalConfig()).evaluate(SEED)
    pool = make_pool("gemm", device="cuda", gpu=gpu, config=EvalConfig(), pool=PoolConfig())
    try:
        results = [pool.evaluate(SEED) for _ in range(4)]
    finally:
        pool.close()
    print(f"gemm seed back to back: {[(r.wall_s, round(r.fitness, 4), r.stage_s.get('waited')) for r in results]}; "
          f"cold {cold.wall_s:.1f} s fitness {cold.fitness:.4f}")
    assert all(r.status == "correct" for r in [cold, *results]), [r.message for r in [cold, *results]]
    assert results[3].stage_s["waited"] == 0.0, results[3].stage_s
    assert abs(results[2].fitness / cold.fitness - 1) < 0.05, "the set-up beside it changed the score"
