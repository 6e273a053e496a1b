"""The live view of a run: the dashboard on a terminal, plain log lines otherwise (the loop: test_loop.py)."""

from __future__ import annotations

import io
import json

from avo.agent.live import RunView
from avo.evaluate.result import CaseResult, EvalResult


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
