"""Budget limits, odd model behaviour (unknown tools, silence), and the live view."""

from __future__ import annotations

import io
import json

import pytest

from agent_fakes import FakeEvaluator, FakeTask, write_seed
from agent_loopback import Loopback, anthropic_turn, openai_turn, sequence
import avo.commands.evolve as evolve_command
from avo.agent.live import RunView
from avo.cli import main
from avo.evaluate.result import CaseResult, EvalResult
from avo.run.directory import Run


@pytest.fixture
def runs(tmp_path, monkeypatch):
    seed = write_seed(tmp_path / "seed")
    monkeypatch.setattr(evolve_command, "load_task", lambda spec: FakeTask(seed))
    monkeypatch.setattr(evolve_command, "make_evaluator", lambda *a, **k: FakeEvaluator())
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-key-000000")
    return tmp_path / "runs"


def evolve(runs, *extra) -> tuple[int, Run]:
    code = main(["evolve", "--kernel", "gemm", "--device", "interpret", "--runs-dir", str(runs), "--quiet", *extra])
    return code, Run.open("latest", runs)


def test_cost_budget_ends_the_run(runs, monkeypatch):
    # 100k input + 10k output tokens of a claude-sonnet model: 0.3 + 0.15 = $0.45 a turn
    turn = anthropic_turn(("list_files", {}), usage=(100_000, 10_000))
    with Loopback(sequence([turn])) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        code, run = evolve(runs, "--agent", "anthropic", "--max-cost", "1.0")
    assert code == 0 and len(server.requests) == 3  # $0.45, $0.90, $1.35 >= $1.00: stop
    stop = run.events()[-1]
    assert "cost budget of $1 spent" in stop["reason"] and stop["cost_usd_total"] == pytest.approx(1.35)


def test_time_budget_ends_the_run(runs, monkeypatch):
    with Loopback(sequence([anthropic_turn(("list_files", {}))])) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        code, run = evolve(runs, "--agent", "anthropic", "--hours", "0.0000001")
    assert code == 0 and "time budget" in run.events()[-1]["reason"] and len(server.requests) == 0


def test_unknown_tools_and_silence(runs):
    script = [openai_turn(("frobnicate", {"x": 1})), openai_turn(text="thinking..."), openai_turn(text="still"),
              openai_turn(text="nothing")]
    with Loopback(sequence(script)) as server:
        code, run = evolve(runs, "--agent", "openai", "--base-url", server.url + "/v1", "--model", "local-model")
    assert code == 0
    unknown = server.requests[1]["body"]["messages"][-1]
    assert unknown["role"] == "tool" and "unknown tool 'frobnicate'" in unknown["content"]
    nudge = server.requests[2]["body"]["messages"][-1]
    assert nudge["role"] == "user" and "No tool was called" in nudge["content"]
    events = run.events()
    assert "called no tool in 3 turns" in events[-1]["reason"]
    assert any(e["kind"] == "price_unknown" for e in events)  # local-model has no price: said once


def test_live_dashboard_renders_progress_and_pauses():
    out = io.StringIO()
    view = RunView(title="avo r1 · gemm · h200", hours=2, max_candidates=10, out=out)
    assert view.plain  # a StringIO is not a terminal
    view.plain = False
    case = CaseResult(case="4096x4096x4096", suite="bench", tflops=612.5, library_tflops=770.0, speedup=0.795)
    view.set_best("c0000", EvalResult(status="correct", fitness=0.795, cases=[case], timing_source="gpu"))
    view.event("tool_call", {"name": "evaluate", "arguments": {"rationale": "stages 3 -> 4"}, "elapsed_s": 1800})
    view.event("tool_result", {"name": "evaluate", "content": "", "is_error": False, "data": {
        "cid": "c0001", "status": "incorrect", "rule": "check.mismatch", "fitness": 0.0, "accepted": False,
        "best_cid": "c0000", "best_fitness": 0.795}})
    view.event("api_wait", {"attempt": 3, "delay_s": 8.0, "reason": "overloaded (529)"})
    from rich.console import Console

    console = Console(file=io.StringIO(), width=120, force_terminal=False)
    console.print(view)
    screen = console.file.getvalue()
    for expected in ("0.50 / 2 h", "0 ok, 1 failed", "best c0000: fitness 0.795", "612.5", "770.0",
                     "API paused: overloaded (529), retry 3 in 8s", "c0001: incorrect check.mismatch"):
        assert expected in screen, (expected, screen)


def test_plain_log_lines_when_not_a_terminal():
    out = io.StringIO()
    view = RunView(title="t", hours=1, out=out)
    view.event("api_wait", {"attempt": 1, "delay_s": 2.0, "reason": "rate limited (429)"})
    view.event("tool_result", {"name": "evaluate", "content": "", "is_error": False, "data": {
        "cid": "c0002", "status": "correct", "rule": None, "fitness": 1.25, "accepted": True,
        "best_cid": "c0002", "best_fitness": 1.25, "cases": []}})
    lines = out.getvalue().splitlines()
    assert "API paused: rate limited (429)" in lines[0] and "c0002: correct fitness 1.25 ACCEPTED" in lines[1]
    assert json.dumps(view.best_cid) == '"c0002"'
