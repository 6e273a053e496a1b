"""The evaluation pool (evaluate/pool.py) with real interpreter workers: several candidates at once, a worker killed
mid-evaluation, and the `--gpus` / `--workers` choices refused in one line."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from worker_procs import evaluation_workers
from avo.config import EvalConfig, PoolConfig
from avo.errors import UserError
from avo.evaluate.pool import choose_gpus, make_pool
from avo.gpus import PROFILES

KERNELS = Path(__file__).parent / "kernels"
H200 = PROFILES["h200"]


def pool_of(workers: int, prewarm: bool = True, **settings):
    config = EvalConfig(**({"check_suite": "tiny", "seed": 3} | settings))
    return make_pool("gemm", device="interpret", gpu=H200, config=config,
                     pool=PoolConfig(workers=workers, prewarm=prewarm))


def workers_past_import() -> list[int]:
    return evaluation_workers(scoring=True)


def spinning() -> list[int]:
    """The workers past import, once there is one (the endless loop's), waited for with a bound."""
    deadline = time.monotonic() + 90
    while not (pids := workers_past_import()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(pids) == 1, "the endless loop never reached its first case"
    return pids


def test_a_pool_of_two_scores_a_candidate_while_its_other_worker_is_busy():
    """The second candidate is scored, start to end, while the first still runs on the other worker: the two are
    evaluated at once, whatever the machine's speed (with one worker it would wait behind the endless loop)."""
    pool = pool_of(2, bench_suite="", check_timeout_s=600.0)
    try:
        hung = pool.submit(KERNELS / "endless_loop")
        good = pool.submit(KERNELS / "good_gemm")
        scored = good.result(timeout=300)
        busy = not hung.done()
        os.kill(spinning()[0], signal.SIGKILL)  # the endless loop ends here rather than at its stage's limit
        hung.result(timeout=60)
    finally:
        pool.close()
    assert busy, "the first candidate was over before the second was scored: nothing ran at once"
    assert scored.status == "correct" and scored.worker in ("cpu 0", "cpu 1"), scored.message


def test_a_worker_killed_mid_evaluation_is_a_crash_and_the_pool_goes_on():
    pool = pool_of(2, bench_suite="", check_timeout_s=120.0)
    try:
        hung = pool.submit(KERNELS / "endless_loop")
        pids = spinning()
        good = pool.submit(KERNELS / "good_gemm")  # on the other worker, while the first one spins
        time.sleep(0.5)
        os.kill(pids[0], signal.SIGKILL)
        crashed = hung.result(timeout=60)
        assert good.result(timeout=90).status == "correct"
        after = pool.evaluate(KERNELS / "good_gemm")
    finally:
        pool.close()
    assert (crashed.status, crashed.rule) == ("crash", "crash"), crashed.message
    assert "killed by SIGKILL during stage compile" in crashed.message and crashed.worker.startswith("cpu ")
    assert after.status == "correct", after.message


def test_gpus_are_chosen_by_position_among_the_visible_ones():
    visible = ["0", "1", "2", "3"]
    assert choose_gpus("all", visible) == visible
    assert choose_gpus("0, 2", visible) == ["0", "2"]
    assert choose_gpus("1,0", ["5", "7"]) == ["7", "5"]  # CUDA_VISIBLE_DEVICES=5,7: the names a worker is given


@pytest.mark.parametrize("text, phrase", [
    ("0,,1", "GPU indices separated by commas"), ("first", "GPU indices separated by commas"),
    ("1,1", "names a GPU twice"), ("4", "there is no GPU 4; this machine shows 4 (0-3)"), ("-1", "separated"),
])
def test_a_bad_gpu_list_is_one_line(text, phrase):
    with pytest.raises(UserError, match=phrase.replace("(", r"\(").replace(")", r"\)")):
        choose_gpus(text, ["0", "1", "2", "3"])


def test_no_gpu_at_all_says_what_to_do_instead():
    with pytest.raises(UserError, match="no NVIDIA GPU found.*--device interpret --workers N"):
        choose_gpus("all", [])


@pytest.mark.parametrize("device, settings, phrase", [
    ("interpret", {"gpus": "0,1"}, "use --workers N"),
    ("cuda", {"workers": 4}, "--gpus 0,1,2,3 or --gpus all"),
    ("interpret", {"cluster": "ray", "gpus": "all"}, "leave --gpus out"),
])
def test_flags_that_do_not_go_together_are_refused(device, settings, phrase):
    from avo.cluster import make_pool as run_pool  # the run's pool: the cluster's with --cluster, else this one

    with pytest.raises(UserError, match=phrase):
        run_pool("gemm", device=device, gpu=H200, config=EvalConfig(), pool=PoolConfig(**settings))
