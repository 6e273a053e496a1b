"""One move per worker: the heuristic agent's batch is what it would try one move after another, and it learns the
number of workers from the system prompt the loop gives every model (agent/context.py)."""

from __future__ import annotations

from types import SimpleNamespace

from avo.agent import context
from avo.agent.heuristic.knobs import parse_knobs, point_of
from avo.agent.heuristic.rules import Shape, roles
from avo.agent.heuristic.search import Search, Trial
from avo.agent.models.heuristic import _workers

SEED = '''import triton

BLOCK_M = 64  # avo: tune 64 128 256
BLOCK_N = 64  # avo: tune 64 128 256
BLOCK_K = 32  # avo: tune 32 64 128
NUM_WARPS = 4  # avo: tune 4 8
NUM_STAGES = 2  # avo: tune 2 3 4
'''


def search() -> Search:
    knobs = parse_knobs(SEED)
    return Search(knobs=knobs, shape=Shape(kind="gemm", roles=roles(knobs)), incumbent=point_of(knobs),
                  incumbent_fitness=0.0, seed=3)


def test_a_batch_of_moves_is_the_sequence_one_worker_would_try_when_nothing_is_learned():
    batch = [m.point for m in search().next_moves(4)]
    one_by_one, s = [], search()
    for _ in range(4):
        move = s.next_move()
        one_by_one.append(move.point)
        s.record(Trial(point=move.point, status="correct", fitness=0.0))  # fitness 0: teaches the ranking nothing
    assert batch == one_by_one and len({tuple(sorted(p.items())) for p in batch}) == 4


def test_asking_for_a_batch_leaves_what_was_tried_unchanged():
    s = search()
    s.next_moves(3)
    assert s.trials == {}


def test_the_system_prompt_tells_the_model_how_many_workers_there_are():
    config = SimpleNamespace(evaluation=SimpleNamespace(bench_suite="bench", check_suite="check"))
    task = SimpleNamespace(entry="gemm", cases=lambda suite: [], name="gemm")
    from avo.gpus import PROFILES

    def prompt(workers: int, where: str = "") -> str:
        situation = context.Situation(task=task, gpu=PROFILES["h200"], device="cuda", config=config,
                                      workers=workers, where=where)
        return context.system_prompt(situation, [])

    alone, four = prompt(1), prompt(4, "gpu 0, gpu 1, gpu 2, gpu 3")
    assert "evaluation workers" not in alone and "$workers_note" not in alone
    assert "4 evaluation workers (gpu 0, gpu 1, gpu 2, gpu 3): up to 4 `evaluate` calls in one response" in four
    assert (_workers(alone), _workers(four)) == (1, 4)
