"""Ctrl-C finishes the current step and leaves a resumable run; `--resume` continues it.

The SIGINT test drives sessions in real subprocesses (agent_driver.py: the fake task and evaluator, a scripted
model); the resume tests drive them in process, with faults injected where a kill would land.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_fakes import SEED_SOURCE, FakeEvaluator, evolve, fake_session, write_seed
from avo.agent.models.scripted import ScriptedModel, turn
from avo.run.directory import Run

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


def driver(seed: Path, runs: Path, first_step: int, max_candidates: str = "-", resume: str = "") -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)])}
    cmd = [sys.executable, str(HERE / "agent_driver.py"), str(seed), str(runs), "0.4", str(first_step),
           max_candidates, *([resume] if resume else [])]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for(predicate, timeout_s: float = 60.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def evaluate_calls(runs: Path) -> int:
    paths = list(runs.glob("*/transcript.jsonl"))
    if not paths:
        return 0
    lines = paths[0].read_text().splitlines()
    return sum('"kind": "tool_call"' in line and '"name": "evaluate"' in line for line in lines)


def test_sigint_stops_after_the_step_and_resume_continues(tmp_path):
    seed, runs = write_seed(tmp_path / "seed"), tmp_path / "runs"
    proc = driver(seed, runs, 0)
    wait_for(lambda: evaluate_calls(runs) >= 2)  # mid-way through the second evaluation (0.4 s each)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert "continue with: avo evolve --resume" in out
    run = Run.open("latest", runs)
    events = run.events()
    assert run.info()["state"] == "stopped" and events[-1]["kind"] == "stop"
    calls = [e["id"] for e in events if e["kind"] == "tool_call"]
    results = [e["id"] for e in events if e["kind"] == "tool_result"]
    assert calls == results  # the step that was running finished before the stop
    before = len(run.lineage)
    last = run.lineage.log(limit=1)[0].cid
    elapsed = events[-1]["elapsed_s"]
    assert before >= 3  # baseline + at least two candidates

    proc = driver(seed, runs, 100, str(before + 1), resume=run.id)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    run = Run.open(run.id, runs)
    assert len(run.lineage) == before + 2  # the budget counts the candidates of both sessions
    first_new = run.lineage.info(f"c{before:04d}")
    assert first_new.parent == last  # the workspace carried on from where it stopped
    resumed = [e for e in run.events() if e["kind"] == "context_reset"][-1]
    assert "resumed" in resumed["summary"]  # the conversation restarts from a summary
    sessions = [e for e in run.events() if e["kind"] == "session"]
    assert [s["resumed"] for s in sessions] == [False, True]
    assert run.events()[-1]["elapsed_s"] > elapsed and run.info()["state"] == "finished"


class DiesWhileConfirming(FakeEvaluator):
    """Stands in for a kill -9 during the side-by-side re-run: nothing after `confirm_start` is recorded."""

    def confirm(self, candidate_dir, incumbent_dir):
        self.calls.append("confirm")
        raise KeyboardInterrupt


def test_a_confirmation_cut_short_is_finished_on_resume(tmp_path):
    faster = SEED_SOURCE.replace("SPEED = 1.0", "SPEED = 2.0")
    model = ScriptedModel([turn(("write_file", {"path": "kernel.py", "content": faster}),
                                ("evaluate", {"rationale": "2x"})),
                           turn(("note", {"text": "after the resume"}))])
    dying, healthy = DiesWhileConfirming(), FakeEvaluator()
    session, _, _ = fake_session(tmp_path, model, evaluator=dying, flags={"budget.max_candidates": 2})
    assert evolve(session).code == 130  # the kill mid-step: stopped, resumable
    run = Run.open("latest", tmp_path / "runs")
    assert run.lineage.best == "c0000" and run.load_eval("c0001").fitness == 2.0  # measured faster, undecided
    assert [e["kind"] for e in run.events()][-2:] == ["confirm_start", "stop"]
    session, run, lines = fake_session(tmp_path, model, evaluator=healthy, flags={"budget.max_candidates": 1},
                                       resume=run.id)
    done = evolve(session, run, lines)
    run = Run.open(run.id, tmp_path / "runs")
    assert done.code == 0 and healthy.calls == ["confirm"] and run.lineage.best == "c0001"
    end = next(e for e in run.events() if e["kind"] == "confirm_end")
    assert end["cid"] == "c0001" and end["accepted"] and end["resumed"]
    assert "confirmation cut short by the stop, finished now" in done.out


def test_a_baseline_cut_short_after_its_commit_is_finished_on_resume(tmp_path, monkeypatch):
    from avo.run.lineage.repo import Lineage

    evaluator = FakeEvaluator()
    accept = Lineage.accept

    def dies_once(self, cid):  # a kill between the seed's baseline tag and its acceptance
        monkeypatch.setattr(Lineage, "accept", accept)
        raise KeyboardInterrupt

    monkeypatch.setattr(Lineage, "accept", dies_once)
    flags = {"agent.kind": "heuristic", "budget.max_candidates": 1}
    with pytest.raises(KeyboardInterrupt):
        evolve(fake_session(tmp_path, evaluator=evaluator, flags=flags)[0])
    run = Run.open("latest", tmp_path / "runs")
    assert run.lineage.baseline == "c0000" and run.lineage.best is None
    session, run, lines = fake_session(tmp_path, evaluator=evaluator, flags={"budget.max_candidates": 1},
                                       resume=run.id)
    assert evolve(session, run, lines).code == 0
    run = Run.open(run.id, tmp_path / "runs")
    assert run.lineage.best in ("c0000", "c0001") and run.lineage.info("c0000").accepted
    assert evaluator.calls.count("evaluate") == 2  # the seed's result was kept, not measured again
    assert [e["kind"] for e in run.events()].count("baseline") == 1
