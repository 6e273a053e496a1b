"""The heuristic agent inside the real loop, tools, lineage and run directory (in process); only the task and the
evaluator are instant fakes that score a kernel's knob point on a synthetic landscape."""

from __future__ import annotations

import hashlib
import math
import re
from pathlib import Path

import pytest

from agent_fakes import evolve as drive, fake_session
from avo.agent.heuristic.knobs import parse_knobs, point_of
from avo.evaluate.result import CaseResult, EvalResult
from avo.run.directory import Run
from avo.tasks.base import Case

SEED = '''"""A stand-in GEMM whose knobs the fake evaluator scores."""
BLOCK_M = 64  # avo: tune 64 128 256
BLOCK_N = 64  # avo: tune 64 128 256
BLOCK_K = 32  # avo: tune 32 64 128
NUM_WARPS = 4  # avo: tune 4 8
NUM_STAGES = 2  # avo: tune 2 3 4


def gemm(a, b):
    return a @ b
'''
PEAK = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "NUM_WARPS": 8, "NUM_STAGES": 4}


class KnobTask:
    """C = A @ B for tests: kernel.py must define gemm(a, b)."""

    name = "gemm"
    entry = "gemm"

    def __init__(self, seed_dir: Path):
        self.seed_dir = seed_dir

    def cases(self, suite: str) -> list[Case]:
        return [Case("64x64x64", {"m": 64, "n": 64, "k": 64}, "float16")]

    def default_seed(self) -> str:
        return str(self.seed_dir)


class KnobEvaluator:
    def __init__(self):
        self.sources: list[str] = []

    def evaluate(self, candidate_dir: Path) -> EvalResult:
        source = (Path(candidate_dir) / "kernel.py").read_text()
        self.sources.append(source)
        return score(source)

    def confirm(self, candidate_dir: Path, incumbent_dir: Path) -> tuple[EvalResult, EvalResult]:
        return (score((Path(candidate_dir) / "kernel.py").read_text()),
                score((Path(incumbent_dir) / "kernel.py").read_text()))


def score(source: str) -> EvalResult:
    compile(source, "kernel.py", "exec")
    point = point_of(parse_knobs(source))
    if (point["BLOCK_M"] + point["BLOCK_N"]) * point["BLOCK_K"] * point["NUM_STAGES"] * 2 > 227 * 1024:
        return EvalResult(status="compile_error", rule="compile", message="out of resource: shared memory")
    speed = math.exp(-0.3 * sum(abs(math.log2(point[k] / v)) for k, v in PEAK.items()))
    case = CaseResult(case="64x64x64", suite="tiny", dtype="float16", correct=True, ms=1 / speed, library_ms=1.0,
                      speedup=speed, spread=0.0, library_spread=0.0)
    return EvalResult(status="correct", cases=[case], fitness=speed, timing_source="interpreter", device="cpu")


@pytest.fixture
def evaluator(tmp_path, monkeypatch):
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "kernel.py").write_text(SEED)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    return KnobEvaluator()


def evolve(tmp_path, evaluator: KnobEvaluator, flags: dict | None = None, resume: str | None = None):
    """`avo evolve --kernel gemm --device interpret` on the knob task, with the agent the flags name (auto: no key,
    so the heuristic); returns the Outcome (exit code, run, printed lines)."""
    seed = tmp_path / "seed"
    session, run, lines = fake_session(tmp_path, evaluator=evaluator, task=KnobTask(seed), seed=seed, flags=flags,
                                       resume=resume)
    return drive(session, run, lines)


def distinct(sources: list[str]) -> bool:
    return len({hashlib.sha256(s.encode()).hexdigest() for s in sources}) == len(sources)


def test_auto_without_a_key_is_the_heuristic_and_it_climbs(tmp_path, evaluator):
    done = evolve(tmp_path, evaluator, {"budget.max_candidates": 8})
    run = done.run
    assert done.code == 0
    assert "agent: heuristic (offline; no ANTHROPIC_API_KEY set)" in done.out
    assert len(run.lineage) == 9 and distinct(evaluator.sources)
    best = run.load_eval(run.lineage.best).fitness
    assert best > 2 * run.load_eval(run.lineage.baseline).fitness
    rationales = [i.rationale for i in run.lineage.log()[:-1]]
    assert all(re.search(r"expect [+-]\d+%", r) for r in rationales), rationales


def test_context_resets_do_not_make_it_repeat(tmp_path, evaluator):
    # small enough to restart a few times, large enough that a restarted conversation gets to evaluate
    done = evolve(tmp_path, evaluator, {"agent.kind": "heuristic", "agent.context_limit_tokens": 3000,
                                        "budget.max_candidates": 14})
    run = done.run
    assert done.code == 0
    assert sum(e["kind"] == "context_reset" for e in run.events()) >= 2
    assert len(run.lineage) == 15 and distinct(evaluator.sources)


def test_a_summary_larger_than_the_limit_does_not_restart_every_step(tmp_path, evaluator):
    # the restart summary alone (system prompt, best kernel, lineage) is far over 200 tokens
    done = evolve(tmp_path, evaluator, {"agent.kind": "heuristic", "agent.context_limit_tokens": 200,
                                        "budget.max_candidates": 4, "budget.hours": 0.005})
    run = done.run
    assert done.code == 0 and len(run.lineage) == 5
    events = run.events()
    turns = sum(e["kind"] == "model_turn" for e in events)
    assert sum(e["kind"] == "context_reset" for e in events) < turns / 2


def test_resume_continues_where_it_stopped(tmp_path, evaluator):
    done = evolve(tmp_path, evaluator, {"agent.kind": "heuristic", "budget.max_candidates": 4})
    run = done.run
    assert done.code == 0 and len(run.lineage) == 5
    first_best = run.load_eval(run.lineage.best).fitness
    run.set_state("stopped")
    done = evolve(tmp_path, evaluator, {"budget.max_candidates": 9}, resume=run.id)
    run = done.run
    assert done.code == 0 and len(run.lineage) == 10
    assert distinct(evaluator.sources)
    assert run.load_eval(run.lineage.best).fitness >= first_best


def test_it_finishes_the_run_when_the_search_is_exhausted(tmp_path, evaluator):
    done = evolve(tmp_path, evaluator, {"agent.kind": "heuristic", "budget.hours": 1.0})
    run = done.run
    assert done.code == 0
    stop = [e for e in run.events() if e["kind"] == "stop"][-1]
    assert stop["state"] == "finished" and "heuristic" in stop["reason"]
    assert point_of(parse_knobs(_source(run, run.lineage.best))) == PEAK
    assert distinct(evaluator.sources)


def _source(run: Run, cid: str) -> str:
    dest = run.path / "co" / cid
    run.lineage.checkout(cid, dest)
    return (dest / "kernel.py").read_text()
