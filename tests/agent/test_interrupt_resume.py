"""Ctrl-C finishes the current step and leaves a resumable run; `--resume` continues it.

Real subprocesses run the real CLI (agent_driver.py swaps in the fake task and evaluator) against a loopback
Anthropic server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from agent_fakes import SEED_SOURCE, FakeEvaluator, FakeTask, write_seed
from agent_loopback import Loopback, anthropic_turn, sequence
import avo.commands.evolve as evolve_command
from avo.cli import main
from avo.run.directory import Run

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


def endless(index, body):
    """Each turn writes a slightly faster kernel and evaluates it."""
    speed = round(1.0 + 0.25 * (index + 1), 2)
    source = SEED_SOURCE.replace("SPEED = 1.0", f"SPEED = {speed}")
    return anthropic_turn(("write_file", {"path": "kernel.py", "content": source}),
                          ("evaluate", {"rationale": f"expect {speed}x"}))


def driver(seed: Path, runs: Path, server, *args: str) -> subprocess.Popen:
    env = {**os.environ, "ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "sk-test-key-123456",
           "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)])}
    cmd = [sys.executable, str(HERE / "agent_driver.py"), str(seed), "0.4", "--",
           "evolve", "--runs-dir", str(runs), "--quiet", *args]
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
    with Loopback(endless) as server:
        proc = driver(seed, runs, server, "--kernel", "gemm", "--device", "interpret", "--hours", "1",
                      "--agent", "anthropic")
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

        requests_before = len(server.requests)
        proc = driver(seed, runs, server, "--resume", run.id, "--max-candidates", str(before + 1))
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
    run = Run.open(run.id, runs)
    assert len(run.lineage) == before + 2  # the budget counts the candidates of both sessions
    first_new = run.lineage.info(f"c{before:04d}")
    assert first_new.parent == last  # the workspace carried on from where it stopped
    resumed = server.requests[requests_before]["body"]["messages"]
    assert len(resumed) == 1 and "resumed" in resumed[0]["content"][0]["text"]
    sessions = [e for e in run.events() if e["kind"] == "session"]
    assert [s["resumed"] for s in sessions] == [False, True]
    assert run.events()[-1]["elapsed_s"] > elapsed and run.info()["state"] == "finished"


class DiesWhileConfirming(FakeEvaluator):
    """Stands in for a kill -9 during the side-by-side re-run: nothing after `confirm_start` is recorded."""

    def confirm(self, candidate_dir, incumbent_dir):
        self.calls.append("confirm")
        raise KeyboardInterrupt


def test_a_confirmation_cut_short_is_finished_on_resume(tmp_path, monkeypatch, capsys):
    seed = write_seed(tmp_path / "seed")
    monkeypatch.setattr(evolve_command, "load_task", lambda spec: FakeTask(seed))
    dying, healthy = DiesWhileConfirming(), FakeEvaluator()
    monkeypatch.setattr(evolve_command, "make_evaluator", lambda *a, **k: dying)
    runs = tmp_path / "runs"
    faster = SEED_SOURCE.replace("SPEED = 1.0", "SPEED = 2.0")
    script = [anthropic_turn(("write_file", {"path": "kernel.py", "content": faster}),
                             ("evaluate", {"rationale": "2x"})),
              anthropic_turn(("note", {"text": "after the resume"}))]
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-key-000000")
    with Loopback(sequence(script)) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        args = ["--runs-dir", str(runs), "--quiet", "--agent", "anthropic"]
        main(["evolve", "--kernel", "gemm", "--device", "interpret", *args, "--max-candidates", "2"])
        run = Run.open("latest", runs)
        assert run.lineage.best == "c0000" and run.load_eval("c0001").fitness == 2.0  # measured faster, undecided
        assert [e["kind"] for e in run.events()][-2:] == ["confirm_start", "stop"]
        monkeypatch.setattr(evolve_command, "make_evaluator", lambda *a, **k: healthy)
        code = main(["evolve", "--resume", run.id, *args, "--max-candidates", "1"])
    run = Run.open(run.id, runs)
    assert code == 0 and healthy.calls == ["confirm"] and run.lineage.best == "c0001"
    end = next(e for e in run.events() if e["kind"] == "confirm_end")
    assert end["cid"] == "c0001" and end["accepted"] and end["resumed"]
    assert "confirmation cut short by the stop, finished now" in capsys.readouterr().out


def test_a_baseline_cut_short_after_its_commit_is_finished_on_resume(tmp_path, monkeypatch):
    from avo.run.lineage.repo import Lineage

    seed = write_seed(tmp_path / "seed")
    monkeypatch.setattr(evolve_command, "load_task", lambda spec: FakeTask(seed))
    evaluator = FakeEvaluator()
    monkeypatch.setattr(evolve_command, "make_evaluator", lambda *a, **k: evaluator)
    accept = Lineage.accept

    def dies_once(self, cid):  # a kill between the seed's baseline tag and its acceptance
        monkeypatch.setattr(Lineage, "accept", accept)
        raise KeyboardInterrupt

    monkeypatch.setattr(Lineage, "accept", dies_once)
    runs = tmp_path / "runs"
    args = ["--runs-dir", str(runs), "--quiet", "--agent", "heuristic"]
    assert main(["evolve", "--kernel", "gemm", "--device", "interpret", *args, "--max-candidates", "1"]) == 130
    run = Run.open("latest", runs)
    assert run.lineage.baseline == "c0000" and run.lineage.best is None
    assert main(["evolve", "--resume", run.id, *args, "--max-candidates", "1"]) == 0
    run = Run.open(run.id, runs)
    assert run.lineage.best in ("c0000", "c0001") and run.lineage.info("c0000").accepted
    assert evaluator.calls.count("evaluate") == 2  # the seed's result was kept, not measured again
    assert [e["kind"] for e in run.events()].count("baseline") == 1
