"""Run directories: create/open, run.json, transcript, evals, the lock, and counters that survive crashes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lineage_fakes import result, write_candidate

from avo.config import RunConfig
from avo.errors import UserError
from avo.run.lineage.repo import Lineage
from avo.run.directory import Run, list_runs


def make_run(runs_dir: Path, **kwargs) -> Run:
    return Run.create(RunConfig(kernel="gemm", seed=3), runs_dir=runs_dir, gpu="h200", agent="heuristic", **kwargs)


def test_create_lays_out_the_run(tmp_path, monkeypatch):
    import avo.run.directory as directory

    class Frozen(datetime):  # both runs in one second, however slow the machine
        @classmethod
        def now(cls, tz=None):
            return datetime(2026, 12, 4, 14, 25, 53, tzinfo=tz)

    monkeypatch.setattr(directory, "datetime", Frozen)
    run = make_run(tmp_path)
    assert re.fullmatch(r"\d{8}-\d{6}-gemm", run.id)
    for sub in ("lineage", "evals", "profiles", "report", "workspace", "transcript.jsonl", "notes.md", "run.json"):
        assert (run.path / sub).exists(), sub
    assert run.workspace == run.path / "workspace" and run.notes_path == run.path / "notes.md"
    info = run.info()
    assert (info["task"], info["gpu"], info["agent"], info["seed"], info["state"]) == (
        "gemm", "h200", "heuristic", 3, "created")
    assert info["versions"]["python"] and info["started"] == info["updated"]
    assert run.config == RunConfig(kernel="gemm", seed=3)
    assert not list(tmp_path.glob(".creating-*"))
    second = make_run(tmp_path)  # same second: a suffix keeps ids unique and still sortable
    assert run.id == "20261204-142553-gemm" and second.id == "20261204-142553-gemm-2"


def test_custom_ids_and_open_forms(tmp_path):
    older = make_run(tmp_path, run_id="a-run")
    newer = make_run(tmp_path, run_id="b-run")
    assert Run.open("a-run", tmp_path).path == older.path
    assert Run.open(str(newer.path), tmp_path / "elsewhere").id == "b-run"
    assert Run.open("latest", tmp_path).id == "b-run"
    assert [r.id for r in list_runs(tmp_path)] == ["a-run", "b-run"]
    for bad in ("nope", "../x"):
        with pytest.raises(UserError, match="unknown run"):
            Run.open(bad, tmp_path)
    with pytest.raises(UserError, match="no runs"):
        Run.open("latest", tmp_path / "empty")
    with pytest.raises(UserError, match="already exists"):
        make_run(tmp_path, run_id="a-run")
    with pytest.raises(UserError, match="bad run id"):
        make_run(tmp_path, run_id="has space")


def test_corrupt_run_json_is_one_clear_error(tmp_path):
    run = make_run(tmp_path, run_id="r")
    (run.path / "run.json").write_text('{"config": {"kernel": "gemm"')
    with pytest.raises(UserError, match="run.json of run 'r' is corrupt"):
        Run.open("r", tmp_path)
    (run.path / "run.json").write_text(json.dumps({"config": {"seed": "many"}}))
    with pytest.raises(UserError, match="corrupt: bad config"):
        Run.open("r", tmp_path)
    assert list_runs(tmp_path) == []  # listing skips what it cannot read


def test_settings_an_older_avo_wrote_are_dropped_and_named(tmp_path):
    run = make_run(tmp_path, run_id="old")
    info = json.loads((run.path / "run.json").read_text())
    info["config"]["evaluation"]["preheat_ms"] = 1000.0
    info["config"]["retired"] = 1
    (run.path / "run.json").write_text(json.dumps(info))
    reopened = Run.open("old", tmp_path)
    assert sorted(reopened.dropped_settings) == ["evaluation.preheat_ms", "retired"]
    assert reopened.config.evaluation.rep_ms == run.config.evaluation.rep_ms


def test_state_and_evals(tmp_path):
    run = make_run(tmp_path)
    run.set_state("running", pid=os.getpid())
    assert run.info()["state"] == "running" and run.info()["pid"] == os.getpid()
    with pytest.raises(ValueError):
        run.set_state("dancing")
    evaluation = result(fitness=1.25)
    run.save_eval("c0000", evaluation)
    assert run.load_eval("c0000") == evaluation and run.load_eval("c0001") is None
    (run.evals_dir / "c0002.json").write_text('{"status": "bogus"}')
    with pytest.raises(UserError, match="corrupt"):
        run.load_eval("c0002")


def test_a_result_committed_but_not_filed_before_a_kill_is_filed_on_resume(tmp_path):
    run = make_run(tmp_path)
    src = tmp_path / "src"
    with run.lock():
        for speed in (1, 2):
            write_candidate(src, f"SPEED = {speed}\n")
            scored = result(fitness=float(speed))
            run.hold_eval(scored)
            cid = run.lineage.commit(src, parent=None, result=scored, model="m", rationale="r")
        assert run.load_eval(cid) is None  # killed here: committed, not filed
    resumed = Run(run.path)
    assert resumed.recover_held_eval() == "c0001" and resumed.load_eval("c0001") == scored
    write_candidate(src, "SPEED = 3\n")
    resumed.hold_eval(result(fitness=3.0))  # killed before this one's commit: nothing to file it under
    assert Run(run.path).recover_held_eval() is None and not (run.path / "held-eval.json").exists()


def test_transcript_survives_a_torn_line(tmp_path):
    run = make_run(tmp_path)
    run.append_event("turn", text="first", tokens={"in": 3})
    run.append_event("tool_result", data=result())  # pydantic values are stored as JSON
    with open(run.transcript_path, "a") as handle:
        handle.write('{"ts": "2026-01-01", "kind": "turn", "text": "cut sho')
    events = run.events()
    assert [e["kind"] for e in events] == ["turn", "tool_result"]
    assert events[0]["text"] == "first" and "ts" in events[0] and events[1]["data"]["status"] == "correct"
    resumed = Run.open(run.id, tmp_path)
    resumed.append_event("resume")
    lines = run.transcript_path.read_text().splitlines()
    assert [json.loads(line)["kind"] for line in lines] == ["turn", "tool_result", "resume"]
    with open(run.transcript_path, "a") as handle:
        handle.write("garbage\n")
        handle.write(json.dumps({"ts": "x", "kind": "later"}) + "\n")
    with pytest.raises(UserError, match="line 4 is not valid JSON"):
        run.events()


HOLDER = """
import sys, time
from pathlib import Path
from avo.run.directory import Run
run = Run.open(sys.argv[1], Path(sys.argv[2]))
with run.lock():
    print("locked", flush=True)
    time.sleep(120)
"""


def hold_lock(run: Run) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, run.id, str(run.path.parent)], stdout=subprocess.PIPE,
                              text=True)
    assert holder.stdout.readline().strip() == "locked"
    return holder


def test_lock_contention_and_takeover_after_sigkill(tmp_path):
    run = make_run(tmp_path)
    holder = hold_lock(run)
    try:
        with pytest.raises(UserError, match=f"locked by PID {holder.pid}"):
            with run.lock():
                pass
        assert run.lock_holder()["pid"] == holder.pid
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        holder.stdout.close()
    assert run.lock_holder() is None  # its PID is dead
    with run.lock():
        with run.lock():  # re-entrant within one process
            assert run.lock_holder()["pid"] == os.getpid()
    assert run.events()[-1]["kind"] == "lock_taken_over" and run.events()[-1]["previous"]["pid"] == holder.pid
    assert run.lock_holder() is None


def test_summary_says_interrupted_when_running_without_a_holder(tmp_path):
    run = make_run(tmp_path)
    run.set_state("running")
    assert run.summary()["state"] == "interrupted"
    with run.lock():
        assert run.summary()["state"] == "running"


def expected_counters(model: list[tuple[str, float]], accepted: list[str]) -> dict:
    best = accepted[-1] if accepted else None
    return {"candidates": len(model), "ok": sum(s == "correct" for s, _ in model),
            "failed": sum(s != "correct" for s, _ in model), "accepted": len(set(accepted)), "best": best,
            "best_fitness": model[int(best[1:])][1] if best else None}


STEP = st.tuples(st.sampled_from(["correct", "correct", "incorrect", "crash"]), st.floats(0.5, 2.0),
                 st.sampled_from(["accept", "none", "unseen", "reopen", "drop_counters"]))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=1, max_size=8))
def test_counters_match_git_through_crashes_and_resumes(steps):
    """Counters in run.json agree with a scan of git, including after changes they never saw (a crash between the
    lineage update and the run.json write), lost counters, and reopening."""
    with tempfile.TemporaryDirectory() as tmp:
        run = make_run(Path(tmp))
        model, accepted = [], []
        for i, (status, fitness, action) in enumerate(steps):
            src = write_candidate(Path(tmp, "src"), f"V = {i}\n")
            fitness = fitness if status == "correct" else 0.0
            # "unseen": written by a lineage whose run.json update never happened
            lineage = Lineage.open(run.path / "lineage") if action == "unseen" else run.lineage
            parent = lineage.main if i else None
            cid = lineage.commit(src, parent=parent, result=result(status, fitness), model="m", rationale="")
            model.append((status, fitness))
            if status == "correct" and action in ("accept", "unseen"):
                lineage.accept(cid)
                accepted.append(cid)
            if action == "reopen":
                run.close()
                run = Run.open(run.id, Path(tmp))
            if action == "drop_counters":
                info = run.info()
                info.pop("counters")
                (run.path / "run.json").write_text(json.dumps(info))
            counters = run.counters()
            assert {k: counters[k] for k in expected_counters(model, accepted)} == expected_counters(model, accepted)
            stats = run.lineage.stats()
            assert {k: counters[k] for k in stats} == stats
        run.close()
