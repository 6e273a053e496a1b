"""`avo evolve` end to end, in process: the real CLI, run directory, lineage, tools and SDKs (against a loopback
server); only the task and the evaluator are fast fakes (see test_evolve_gemm.py for the real ones)."""

from __future__ import annotations

import json

import pytest

from agent_fakes import SEED_SOURCE, FakeEvaluator, FakeTask, write_seed
from agent_loopback import Loopback, anthropic_turn, openai_turn, sequence
from read_only import read_only_tree
import avo.commands.evolve as evolve_command
from avo.cli import main
from avo.run.directory import Run

SECRET = "sk-ant-test-0123456789-secret"


@pytest.fixture
def fake_task(tmp_path, monkeypatch):
    seed = write_seed(tmp_path / "seed")
    evaluator = FakeEvaluator()
    monkeypatch.setattr(evolve_command, "load_task", lambda spec: FakeTask(seed))
    monkeypatch.setattr(evolve_command, "make_evaluator", lambda *a, **k: evaluator)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    return evaluator


def evolve(tmp_path, server, *extra, config: dict | None = None) -> tuple[int, Run]:
    args = ["evolve", "--kernel", "gemm", "--device", "interpret", "--hours", "1", "--runs-dir", str(tmp_path / "runs"),
            "--quiet", *extra]
    if config:
        path = tmp_path / "config.yaml"
        path.write_text(json.dumps(config))
        args += ["--config", str(path)]
    code = main(args)
    return code, Run.open("latest", tmp_path / "runs")


def kernel(speed: float, extra: str = "") -> str:
    return SEED_SOURCE.replace("SPEED = 1.0", f"SPEED = {speed}") + extra


def tool_results(request: dict) -> list[dict]:
    return [b for m in request["body"]["messages"] if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"]


def test_full_run_with_the_anthropic_api(tmp_path, fake_task, monkeypatch, capsys):
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
        code, run = evolve(tmp_path, server, "--max-candidates", "3", "--agent", "anthropic")
    out = capsys.readouterr().out
    assert code == 0, out
    assert "agent: anthropic, model claude-sonnet-5-5" in out and run.id in out
    lineage = run.lineage
    assert [(i.cid, i.parent, i.status) for i in reversed(lineage.log())] == [
        ("c0000", None, "correct"), ("c0001", "c0000", "correct"), ("c0002", "c0001", "incorrect"),
        ("c0003", "c0001", "correct")]
    assert lineage.baseline == "c0000" and lineage.best == "c0003"
    assert run.load_eval("c0003").fitness == 2.0 and fake_task.calls.count("confirm") == 2
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


def test_full_run_with_an_openai_compatible_server(tmp_path, fake_task, capsys):
    script = [
        openai_turn(("read_file", {"path": "kernel.py"})),
        openai_turn(("edit_file", '{"path": "kernel.py", "old": '), text="oops, cut off"),
        openai_turn(("edit_file", {"path": "kernel.py", "old": "SPEED = 1.0", "new": "SPEED = 1.25"}),
                    ("evaluate", {"rationale": "expect 1.25x"})),
        openai_turn(("read_file", {"path": "/etc/passwd"})),
        openai_turn(("write_file", {"path": "kernel.py", "content": "def gemm(:\n"}), ("evaluate", {"rationale": "x"})),
    ]
    with Loopback(sequence(script)) as server:
        code, run = evolve(tmp_path, server, "--agent", "openai", "--base-url", server.url + "/v1",
                           "--max-candidates", "2")
    assert code == 0, capsys.readouterr().out
    assert [i.status for i in reversed(run.lineage.log())] == ["correct", "correct", "compile_error"]
    assert run.lineage.best == "c0001"
    messages = server.requests[2]["body"]["messages"]
    assert messages[-1]["role"] == "tool" and "not valid JSON" in messages[-1]["content"]
    assert "is absolute" in server.requests[4]["body"]["messages"][-1]["content"]


def test_context_reset_and_supervisor_then_the_run_continues(tmp_path, fake_task, monkeypatch, capsys):
    def script(index, body):
        if not body.get("tools"):  # the supervisor turn
            return anthropic_turn(text="Stop tuning SPEED by tiny steps; checkout best and try 4.0.")
        speed = 1.0 if index < 3 else 4.0  # two no-gain candidates, then the supervised direction
        return anthropic_turn(("write_file", {"path": "kernel.py", "content": kernel(speed, f"# try {index}\n")}),
                              ("note", {"text": f"tried {index}"}), ("evaluate", {"rationale": f"try {index}"}),
                              usage=(2000 * len(body["messages"]), 10))  # grows with the conversation
    config = {"agent": {"context_limit_tokens": 6000, "supervisor_after": 2}, "budget": {"max_candidates": 4}}
    with Loopback(script) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        code, run = evolve(tmp_path, server, "--agent", "anthropic", config=config)
    assert code == 0, capsys.readouterr().out
    kinds = [e["kind"] for e in run.events()]
    assert "context_reset" in kinds and "supervisor" in kinds
    supervisor = next(r for r in server.requests if not r["body"].get("tools"))
    assert "supervisor" in supervisor["body"]["system"][0]["text"].lower()
    after = server.requests[server.requests.index(supervisor) + 1]["body"]["messages"]
    assert "try 4.0" in json.dumps(after)  # the review reached the agent
    resets = [r for r in server.requests if r["body"].get("tools") and len(r["body"]["messages"]) == 1
              and "summary" in json.dumps(r["body"]["messages"])]
    assert resets, "no request started from a summary"
    summary = resets[0]["body"]["messages"][0]["content"][0]["text"]
    assert "SPEED =" in summary and "c0000" in summary and "tried" in summary  # best source, lineage, notes
    assert len(run.lineage) == 5 and run.load_eval(run.lineage.best).fitness == 4.0


def test_suspicious_result_needs_a_clean_rerun(tmp_path, monkeypatch, capsys):
    seed = write_seed(tmp_path / "seed")
    evaluator = FakeEvaluator(suspicious_once=True)
    monkeypatch.setattr(evolve_command, "load_task", lambda spec: FakeTask(seed))
    monkeypatch.setattr(evolve_command, "make_evaluator", lambda *a, **k: evaluator)
    script = [anthropic_turn(("write_file", {"path": "kernel.py", "content": kernel(12.0)}),
                             ("evaluate", {"rationale": "too good"}))]
    with Loopback(sequence(script)) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
        code, run = evolve(tmp_path, server, "--agent", "anthropic", "--max-candidates", "1")
    assert code == 0
    assert evaluator.calls == ["evaluate", "evaluate", "confirm"] and run.lineage.best == "c0001"
    result = next(e for e in run.events() if e["kind"] == "tool_result" and e["name"] == "evaluate")
    assert result["data"]["suspicious"] and result["data"]["confirm"]["candidate"]["suspicious"] is False


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


def test_replay_re_drives_a_recorded_run(tmp_path, fake_task, monkeypatch, capsys):
    def script(index, body):
        source = kernel(1.0 + 0.5 * (index + 1))
        return anthropic_turn(("write_file", {"path": "kernel.py", "content": source}),
                              ("evaluate", {"rationale": f"step {index}"}))
    with Loopback(script) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        code, recorded = evolve(tmp_path, server, "--agent", "anthropic", "--max-candidates", "2")
    assert code == 0
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # replay must not touch the network
    code = main(["evolve", "--kernel", "gemm", "--device", "interpret", "--runs-dir", str(tmp_path / "replayed"),
                 "--quiet", "--replay-from", str(recorded.path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "agent: replay, model replay:claude-sonnet-5-5" in out
    replayed = Run.open("latest", tmp_path / "replayed")
    assert [(i.status, i.fitness, i.rationale) for i in replayed.lineage.log()] == \
        [(i.status, i.fitness, i.rationale) for i in recorded.lineage.log()]
    assert "replayed every recorded turn" in replayed.events()[-1]["reason"]


def test_resuming_a_run_an_older_avo_wrote_names_the_settings_it_ignores(tmp_path, fake_task, monkeypatch, capsys):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    code, run = evolve(tmp_path, None, "--agent", "heuristic", "--max-candidates", "1")
    assert code == 0
    info = json.loads((run.path / "run.json").read_text())
    info["config"]["evaluation"]["preheat_ms"] = 1000.0  # a setting an earlier version had
    (run.path / "run.json").write_text(json.dumps(info))
    capsys.readouterr()
    code = main(["evolve", "--resume", run.id, "--runs-dir", str(tmp_path / "runs"), "--quiet",
                 "--max-candidates", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"resuming run {run.id}" in out and "no longer has were ignored: evaluation.preheat_ms" in out


@pytest.mark.parametrize("case", ["hours nan", "hours inf", "yaml hours .nan", "max-cost -1", "max-candidates 0",
                                  "config is a folder", "runs-dir is a file"])
def test_refused_in_one_line_before_any_run_exists(tmp_path, fake_task, capsys, case):
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


def test_a_read_only_runs_dir_refuses_evolve_and_resume_in_one_line(tmp_path, fake_task, capsys):
    code, run = evolve(tmp_path, None, "--agent", "heuristic", "--max-candidates", "1")
    with read_only_tree(tmp_path / "runs"):
        for args in (["--kernel", "gemm", "--device", "interpret"], ["--resume", run.id, "--max-candidates", "2"]):
            code = main(["evolve", *args, "--runs-dir", str(tmp_path / "runs"), "--quiet"])
            err = capsys.readouterr().err
            assert code == 2 and err.startswith("avo: error: cannot write ") and "make it writable" in err, err
