"""`avo evolve --workers 2` with the heuristic agent under the Triton interpreter: real tools, pool and lineage.

Timing is off (`evaluation.bench_suite: ""`), so every candidate's fitness is 0 and nothing but the baseline is
accepted: what the agent tries next then depends only on what it has tried, and a run with two workers must try
exactly what a run with one does."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from replay_runs import untimed_single_worker_run
from worker_procs import evaluation_workers, parent_of
from avo.run.directory import Run

REPO = Path(__file__).resolve().parents[2]


def start(runs: Path, config: Path, *extra: str) -> subprocess.Popen:
    config.write_text(json.dumps({"evaluation": {"bench_suite": ""}}))
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    return subprocess.Popen([sys.executable, "-m", "avo", "evolve", "--kernel", "gemm", "--device", "interpret",
                             "--agent", "heuristic", "--runs-dir", str(runs), "--quiet", "--config", str(config),
                             *extra], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen, timeout: float = 300) -> Run:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:  # a hung evolve must not outlive the test (its workers die with it)
        proc.kill()
        proc.wait()
        raise
    assert proc.returncode == 0, out[-3000:]
    run = Run.open("latest", Path(proc.args[proc.args.index("--runs-dir") + 1]))
    run.output = out
    return run


def lineage_rows(run: Run, tmp: Path) -> list[tuple]:
    """(parent, status, rationale, hash of kernel.py) of each candidate after the baseline, oldest first."""
    rows = []
    for info in reversed(run.lineage.log()):
        dest = tmp / info.cid
        run.lineage.checkout(info.cid, dest)
        rows.append((info.parent, info.status, info.rationale, hashlib.sha256((dest / "kernel.py").read_bytes())
                     .hexdigest()))
    return rows[1:]


@pytest.mark.slow
def test_two_workers_commit_two_candidates_per_step_and_the_lineage_of_one_worker(tmp_path, tmp_path_factory):
    both = start(tmp_path / "two", tmp_path / "two.json", "--workers", "2", "--max-candidates", "4")
    pair = finish(both)
    single = Run.open("latest", untimed_single_worker_run(tmp_path_factory.mktemp("untimed")))
    two_rows, one_rows = lineage_rows(pair, tmp_path / "co2"), lineage_rows(single, tmp_path / "co1")
    assert len(two_rows) == 4 and all(status == "correct" for _, status, _, _ in two_rows), two_rows
    assert sorted(two_rows) == sorted(one_rows), "two workers tried other points than one"
    assert len({digest for *_, digest in two_rows}) == 4
    turns = [e for e in pair.events() if e["kind"] == "model_turn"]
    evaluating = [sum(c["name"] == "evaluate" for c in t["tool_calls"]) for t in turns]
    assert [n for n in evaluating if n] == [2, 2], evaluating
    assert sorted(c.cid for c in pair.lineage.log()) == ["c0000", "c0001", "c0002", "c0003", "c0004"]
    workers = {pair.load_eval(f"c000{i}").worker for i in range(1, 5)}
    assert workers == {"cpu 0", "cpu 1"}, workers
    # the live view and `avo show` say where each candidate was scored
    assert all(f"c000{i}: correct fitness 0 on cpu " in pair.output for i in range(1, 5)), pair.output[-2000:]
    shown = subprocess.run([sys.executable, "-m", "avo", "show", "latest", "--runs-dir", str(tmp_path / "two")],
                           cwd=REPO, capture_output=True, text=True)
    assert shown.returncode == 0 and "scored on" in shown.stdout and "cpu 1 on " in shown.stdout, shown.stdout
    one = subprocess.run([sys.executable, "-m", "avo", "show", "latest", "c0002", "--runs-dir", str(tmp_path / "two")],
                         cwd=REPO, capture_output=True, text=True)
    assert f"scored on {pair.load_eval('c0002').placement()}" in one.stdout, one.stdout


def _kill_first_worker_after_the_baseline(proc: subprocess.Popen, runs: Path, killed: list) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        transcript = next(runs.glob("*/transcript.jsonl"), None)
        if transcript is not None and '"kind": "baseline"' in transcript.read_text():
            for pid in _workers_scoring(proc.pid):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
        time.sleep(0.05)


def _workers_scoring(parent: int) -> list[int]:
    """Evaluation workers of `parent` that have begun on a candidate's cases."""
    return evaluation_workers(lambda pid: parent_of(pid) == parent, scoring=True)


@pytest.mark.slow
def test_a_worker_killed_mid_evaluation_is_a_crash_and_the_run_goes_on(tmp_path):
    proc = start(tmp_path / "runs", tmp_path / "c.json", "--workers", "2", "--max-candidates", "4")
    killed: list = []
    killer = threading.Thread(target=_kill_first_worker_after_the_baseline, args=(proc, tmp_path / "runs", killed))
    killer.start()
    run = finish(proc)
    killer.join()
    assert killed, "no worker was caught scoring a candidate"
    rows = [(c.cid, c.status) for c in reversed(run.lineage.log())]
    assert len(rows) == 5 and [status for _, status in rows].count("crash") == 1, rows
    crashed = next(cid for cid, status in rows if status == "crash")
    result = run.load_eval(crashed)
    assert "killed by SIGKILL" in result.message and result.worker in ("cpu 0", "cpu 1"), result.message
    assert run.info()["state"] == "finished"
