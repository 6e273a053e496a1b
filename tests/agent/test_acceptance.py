"""The acceptance margin: standard errors of the fitness, not the spread of single calls."""

from __future__ import annotations

import pytest

from avo.agent.acceptance import MIN_NOISE, noise
from avo.evaluate.result import CaseResult, EvalResult
from avo.evaluate.worker.timing import Measurement


def result(errors: list[float] | None, spread: float = 0.2) -> EvalResult:
    cases = [CaseResult(case=f"c{i}", suite="bench", speedup=1.0, spread=spread, library_spread=spread,
                        ms_error=None if errors is None else e, library_ms_error=None if errors is None else e)
             for i, e in enumerate(errors or [0.0] * 4)]
    return EvalResult(status="correct", cases=cases, fitness=1.0)


def test_margin_comes_from_the_error_of_the_medians_not_the_per_call_spread():
    # Four cases, each median known to 1% (candidate and library): the geomean's error is sqrt(4 * 2e-4) / 4.
    a, b = result([0.01] * 4), result([0.01] * 4)
    assert noise(a, b) == pytest.approx(2 * (2 * 4 * 2e-4) ** 0.5 / 4)
    assert noise(a, b) < 0.05  # a 20% per-call spread (short kernels) no longer blocks a 5% gain


def test_results_without_median_errors_fall_back_to_the_spread():
    assert noise(result(None, spread=0.2)) == pytest.approx(2 * (4 * 2 * 0.04) ** 0.5 / 4)


def test_floor():
    assert noise(result([0.0] * 4), result([0.0] * 4)) == MIN_NOISE


def test_measurement_error_is_the_spread_of_round_medians_over_sqrt_rounds():
    m = Measurement(source="gpu", round_medians_ms=[1.0, 1.02, 0.98, 1.0])
    expected = (sum((x - 1.0) ** 2 for x in m.round_medians_ms) / 3) ** 0.5 / 1.0 / 2
    assert m.error == pytest.approx(expected)
    assert Measurement(source="gpu", round_medians_ms=[1.0]).error is None


class _Run:
    def __init__(self, best_result: EvalResult):
        self.best_result, self.events = best_result, []

    def append_event(self, kind: str, **fields) -> None:
        self.events.append((kind, fields))

    def load_eval(self, cid: str) -> EvalResult:
        return self.best_result


def _confirm_against_a_failing_incumbent(tmp_path, fitness: float):
    from types import SimpleNamespace

    from avo.agent.acceptance import confirm

    crashed = EvalResult(status="crash", rule="crash", message="the evaluation process was killed (signal 9)")

    class Evaluator:
        def confirm(self, candidate_dir, incumbent_dir):
            again = result([0.001] * 4)
            again.fitness = fitness
            return again, crashed

    recorded = result([0.001] * 4)
    recorded.fitness = 1.5
    run = _Run(recorded)
    ctx = SimpleNamespace(run=run, evaluator=Evaluator(), state=SimpleNamespace(last_confirm=None),
                          lineage=SimpleNamespace(checkout=lambda cid, folder: None), workspace=tmp_path)
    return confirm(ctx, "c0009", result([0.001] * 4), "c0004", tmp_path), run.events


def test_a_best_that_fails_its_rerun_is_not_beaten_by_its_zero(tmp_path):
    """Side by side, an incumbent whose re-run crashed scores 0: the candidate must still beat the best's recorded
    fitness, and the verdict and the run's events say the incumbent failed."""
    (accepted, verdict), events = _confirm_against_a_failing_incumbent(tmp_path, fitness=1.2)
    assert not accepted
    assert "c0004 was crash on its side-by-side re-run" in verdict and "recorded fitness 1.5" in verdict
    assert ("incumbent_failed", {"cid": "c0004", "status": "crash", "rule": "crash",
                                 "message": "the evaluation process was killed (signal 9)"}) in events
    (accepted, verdict), _ = _confirm_against_a_failing_incumbent(tmp_path, fitness=1.8)
    assert accepted and verdict.startswith("accepted: the best c0004 was crash")


def test_the_agent_reads_the_evaluators_notes_with_a_result():
    from avo.agent.acceptance import MAX_NOTES, render
    from avo.evaluate.result import EvalResult

    notice = ("ptxas: attention_bf16_d64: wgmma.mma_async instructions are serialized due to insufficient register "
              "resources for the wgmma pipeline (C7511)")
    result = EvalResult(status="correct", fitness=0.59, notes=[notice] + [f"n{i}" for i in range(10)])
    data = {"best_cid": "c3", "best_fitness": 1.0, "buckets": {}}
    text = render("c7", "c3", result, "not accepted", data)
    assert f"note: {notice}" in text.splitlines()
    assert sum(line.startswith("note: ") for line in text.splitlines()) == MAX_NOTES
