"""`avo evolve` with the two SDK adapters (anthropic, openai) in a whole run, each against a loopback server that
speaks its API; and the refusals of the command line. The loop itself is tested with a scripted model in
test_loop.py; the task and the evaluator here are fast fakes (see test_evolve_gemm.py for the real ones)."""

from __future__ import annotations

import time

import pytest

from agent_fakes import SEED_SOURCE, evolve, fake_session
from agent_loopback import Loopback, anthropic_turn, openai_turn, sequence
from read_only import read_only_tree
from worker_procs import evaluation_workers
from avo.cli import main

SECRET = "sk-ant-test-0123456789-secret"


def kernel(speed: float, extra: str = "") -> str:
    return SEED_SOURCE.replace("SPEED = 1.0", f"SPEED = {speed}") + extra


def tool_results(request: dict) -> list[dict]:
    return [b for m in request["body"]["messages"] if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"]


def test_full_run_with_the_anthropic_api(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    script = [
        anthropic_turn(("read_file", {"path": "kernel.py"}), text="Observe the seed."),
        anthropic_turn(("edit_file", {"path": "kernel.py", "old": "SPEED = 1.0", "new": "SPEED = 1.5"}),
                       ("evaluate", {"rationale": "faster: expect 1.5x"})),
        anthropic_turn(("read_file", {"path": "../run.json"}), ("edit_file", {"path": "kernel.py", "old": "x"})),
        anthropic_turn(("write_file", {"path": "kernel.py", "content": kernel(3.0, "WRONG = 1\n")}),
                       ("evaluate", {"rationale": "risky"})),
        anthropic_turn(("checkout", {"cid": "best"}), ("evaluate", {"rationale": "same source again"})),
        anthropic_turn(("write_file", {"path": "kernel.py", "content": kernel(2.0)}),
                       ("evaluate", {"rationale": "expect 2x"})),
        anthropic_turn(("note", {"text": "never reached"})),
    ]
    with Loopback(sequence(script)) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        session, _, lines = fake_session(tmp_path, flags={"budget.max_candidates": 3, "agent.kind": "anthropic"})
        done = evolve(session, lines=lines)
    out, run, evaluator = done.out, done.run, session.evaluator
    assert done.code == 0, out
    assert "agent: anthropic, model claude-sonnet-5-5" in out and run.id in out
    lineage = run.lineage
    assert [(i.cid, i.parent, i.status) for i in reversed(lineage.log())] == [
        ("c0000", None, "correct"), ("c0001", "c0000", "correct"), ("c0002", "c0001", "incorrect"),
        ("c0003", "c0001", "correct")]
    assert lineage.baseline == "c0000" and lineage.best == "c0003"
    assert run.load_eval("c0003").fitness == 2.0 and evaluator.calls.count("confirm") == 2
    assert len(server.requests) == 6  # the candidate budget stopped the run before the 7th turn
    errors = [r for r in tool_results(server.requests[3]) if r.get("is_error")]
    assert "contains '..'" in errors[0]["content"] and "new: Field required" in errors[1]["content"]
    duplicate = tool_results(server.requests[5])[-1]["content"]
    assert "byte-identical to c0001" in duplicate
    events = run.events()
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "baseline" and kinds[-1] == "stop" and "candidate budget of 3 spent" in events[-1]["reason"]
    turn = next(e for e in events if e["kind"] == "model_turn")
    assert turn["usage"]["input_tokens"] == 1000 and turn["cost_usd"] == pytest.approx((1000 * 3 + 50 * 15) / 1e6)
    transcript = run.transcript_path.read_text()
    assert SECRET not in transcript and SECRET not in out
    assert run.info()["state"] == "finished"
    assert (run.workspace / "kernel.py").read_text() == kernel(2.0)


def test_full_run_with_an_openai_compatible_server(tmp_path):
    script = [
        openai_turn(("read_file", {"path": "kernel.py"})),
        openai_turn(("edit_file", '{"path": "kernel.py", "old": '), text="oops, cut off"),
        openai_turn(("edit_file", {"path": "kernel.py", "old": "SPEED = 1.0", "new": "SPEED = 1.25"}),
                    ("evaluate", {"rationale": "expect 1.25x"})),
        openai_turn(("read_file", {"path": "/etc/passwd"})),
        openai_turn(("write_file", {"path": "kernel.py", "content": "def gemm(:\n"}), ("evaluate", {"rationale": "x"})),
    ]
    with Loopback(sequence(script)) as server:
        flags = {"agent.kind": "openai", "agent.base_url": server.url + "/v1", "budget.max_candidates": 2}
        session, _, lines = fake_session(tmp_path, flags=flags)
        done = evolve(session, lines=lines)
    run = done.run
    assert done.code == 0, done.out
    assert [i.status for i in reversed(run.lineage.log())] == ["correct", "correct", "compile_error"]
    assert run.lineage.best == "c0001"
    messages = server.requests[2]["body"]["messages"]
    assert messages[-1]["role"] == "tool" and "not valid JSON" in messages[-1]["content"]
    assert "is absolute" in server.requests[4]["body"]["messages"][-1]["content"]


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    assert main(["evolve", "--kernel", "gemm", "--agent", "anthropic", "--device", "interpret",
                 "--runs-dir", str(tmp_path)]) == 2
    assert main(["evolve", "--kernel", "gemm", "--agent", "replay", "--device", "interpret",
                 "--runs-dir", str(tmp_path)]) == 2
    assert main(["evolve", "--kernel", "nope", "--device", "interpret", "--runs-dir", str(tmp_path)]) == 2
    assert main(["evolve", "--kernel", "gemm", "--hours", "0", "--device", "interpret",
                 "--runs-dir", str(tmp_path)]) == 2
    assert main(["evolve", "--resume", "no-such-run", "--runs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 5 and all(line.startswith("avo: error:") for line in err)
    assert "ANTHROPIC_API_KEY" in err[0] and "--replay-from" in err[1]
    assert not any((tmp_path / name).is_dir() for name in ("latest",)) and not list(tmp_path.glob("*/run.json"))


@pytest.mark.parametrize("case", ["hours nan", "hours inf", "yaml hours .nan", "max-cost -1", "max-candidates 0",
                                  "config is a folder", "runs-dir is a file"])
def test_refused_in_one_line_before_any_run_exists(tmp_path, capsys, case):
    runs = tmp_path / "runs"
    (tmp_path / "yaml").write_text("budget:\n  hours: .nan\n")
    extra = {"hours nan": ["--hours", "nan"], "hours inf": ["--hours", "inf"],
             "yaml hours .nan": ["--config", tmp_path / "yaml"], "max-cost -1": ["--max-cost", "-1"],
             "max-candidates 0": ["--max-candidates", "0"], "config is a folder": ["--config", tmp_path],
             "runs-dir is a file": []}[case]
    if case == "runs-dir is a file":
        runs.write_text("not a folder")
    args = ["evolve", "--kernel", "gemm", "--device", "interpret", "--runs-dir", runs, "--quiet", *extra]
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("avo: error: ") and len(err.strip().splitlines()) == 1, err
    assert "internal error" not in err and not list(tmp_path.rglob("run.json"))
    flag = {"hours nan": "--hours", "hours inf": "--hours", "max-cost -1": "--max-cost",
            "config is a folder": "--config", "runs-dir is a file": "--runs-dir"}.get(case)
    assert flag is None or flag in err
    time.sleep(0.5)  # a pool's workers are started from its threads
    assert not evaluation_workers(), "a refused run left its prepared evaluation workers running"


def test_a_read_only_runs_dir_refuses_evolve_and_resume_in_one_line(tmp_path, capsys):
    run = evolve(fake_session(tmp_path, flags={"agent.kind": "heuristic", "budget.max_candidates": 1})[0]).run
    with read_only_tree(tmp_path / "runs"):
        for args in (["--kernel", "gemm", "--device", "interpret"], ["--resume", run.id, "--max-candidates", "2"]):
            code = main(["evolve", *args, "--runs-dir", str(tmp_path / "runs"), "--quiet"])
            err = capsys.readouterr().err
            assert code == 2 and err.startswith("avo: error: cannot write ") and "make it writable" in err, err
