"""The agent loop with a scripted model: budgets, nudges, unknown tools and bad arguments, context restarts, the
supervisor, acceptance of suspicious results, re-driving and resuming. The loop, tools, lineage and run directory are
real; the task and the evaluator are fast fakes (agent_fakes.py)."""

from __future__ import annotations

import json

import pytest

from agent_fakes import SEED_SOURCE, FakeEvaluator, evolve, fake_session, write_seed
from avo.agent.models.base import Turn
from avo.agent.models.scripted import ScriptedModel, turn
from avo.agent.stops import ContextOverflow
from avo.run.directory import Run

SECRET = "sk-ant-test-0123456789-secret"


def kernel(speed: float, extra: str = "") -> str:
    return SEED_SOURCE.replace("SPEED = 1.0", f"SPEED = {speed}") + extra


def results_sent(model: ScriptedModel, request: int):
    """The tool results the loop sent with request `request` (the answers to the previous turn's calls)."""
    return model.requests[request][1][-1].tool_results


def test_the_fake_evaluator_is_an_evaluator():
    import avo.evaluate

    assert isinstance(FakeEvaluator(), avo.evaluate.Evaluator)


def test_a_run_commits_every_candidate_and_answers_bad_calls(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)  # a secret in the environment never reaches the transcript
    model = ScriptedModel([
        turn(("read_file", {"path": "kernel.py"}), text="Observe the seed."),
        turn(("edit_file", {"path": "kernel.py", "old": "SPEED = 1.0", "new": "SPEED = 1.5"}),
             ("evaluate", {"rationale": "faster: expect 1.5x"})),
        turn(("read_file", {"path": "../run.json"}), ("edit_file", {"path": "kernel.py", "old": "x"}),
             text=f"the key is {SECRET}"),
        turn(("write_file", {"path": "kernel.py", "content": kernel(3.0, "WRONG = 1\n")}),
             ("evaluate", {"rationale": "risky"})),
        turn(("checkout", {"cid": "best"}), ("evaluate", {"rationale": "same source again"})),
        turn(("write_file", {"path": "kernel.py", "content": kernel(2.0)}), ("evaluate", {"rationale": "expect 2x"})),
        turn(("note", {"text": "never reached"})),
    ])
    evaluator = FakeEvaluator()
    session, _, _ = fake_session(tmp_path, model, evaluator=evaluator, flags={"budget.max_candidates": 3})
    done = evolve(session)
    assert done.code == 0, done.out
    lineage = done.run.lineage
    assert [(i.cid, i.parent, i.status) for i in reversed(lineage.log())] == [
        ("c0000", None, "correct"), ("c0001", "c0000", "correct"), ("c0002", "c0001", "incorrect"),
        ("c0003", "c0001", "correct")]
    assert lineage.baseline == "c0000" and lineage.best == "c0003"
    assert done.run.load_eval("c0003").fitness == 2.0 and evaluator.calls.count("confirm") == 2
    assert len(model.requests) == 6  # the candidate budget stopped the run before the 7th turn
    errors = [r for r in results_sent(model, 3) if r.is_error]
    assert "contains '..'" in errors[0].content and "new: Field required" in errors[1].content
    assert "byte-identical to c0001" in results_sent(model, 5)[-1].content
    events = done.run.events()
    assert events[0]["kind"] == "baseline" and events[-1]["kind"] == "stop"
    assert "candidate budget of 3 spent" in events[-1]["reason"]
    transcript = done.run.transcript_path.read_text()
    assert SECRET not in transcript and "[redacted]" in transcript and SECRET not in done.out
    assert done.run.info()["state"] == "finished"
    assert (done.run.workspace / "kernel.py").read_text() == kernel(2.0)


def test_unknown_tools_bad_arguments_and_silence_end_in_a_nudge_then_a_stop(tmp_path):
    model = ScriptedModel([turn(("frobnicate", {"x": 1})), turn(("read_file", {})),
                           turn(("read_file", {"path": "kernel.py", "mode": "r"})),
                           Turn(text="thinking..."), Turn(text="still"), Turn(text="nothing")])
    done = evolve(fake_session(tmp_path, model)[0])
    assert done.code == 0
    unknown = results_sent(model, 1)[0]
    assert unknown.is_error and "unknown tool 'frobnicate'" in unknown.content
    bad = results_sent(model, 2)[0]
    assert bad.is_error and "bad arguments for read_file: path: Field required" in bad.content
    extra = results_sent(model, 3)[0]  # a misspelt or invented argument is refused, not ignored
    assert extra.is_error and "mode: Extra inputs are not permitted" in extra.content
    nudge = model.requests[4][1][-1]
    assert nudge.role == "user" and "No tool was called" in nudge.text
    assert "called no tool in 3 turns" in done.run.events()[-1]["reason"]


def test_the_cost_budget_ends_the_run(tmp_path):
    # 100k input + 10k output tokens of a claude-sonnet model: 0.3 + 0.15 = $0.45 a turn
    model = ScriptedModel([turn(("list_files", {}), usage=(100_000, 10_000))] * 5, name="claude-sonnet-5-5")
    done = evolve(fake_session(tmp_path, model, flags={"budget.max_cost": 1.0})[0])
    assert done.code == 0 and len(model.requests) == 3  # $0.45, $0.90, $1.35 >= $1.00: stop
    stop = done.run.events()[-1]
    assert "cost budget of $1 spent" in stop["reason"] and stop["cost_usd_total"] == pytest.approx(1.35)


def test_a_model_without_a_price_says_so_once(tmp_path):
    model = ScriptedModel([turn(("list_files", {}), usage=(10, 1))] * 2, name="local-model")
    done = evolve(fake_session(tmp_path, model)[0])
    assert [e["kind"] for e in done.run.events()].count("price_unknown") == 1


def test_the_time_budget_ends_the_run_before_the_first_turn(tmp_path):
    model = ScriptedModel([turn(("list_files", {}))])
    done = evolve(fake_session(tmp_path, model, flags={"budget.hours": 0.0000001})[0])
    assert done.code == 0 and "time budget" in done.run.events()[-1]["reason"] and model.requests == []


def test_context_reset_and_supervisor_then_the_run_continues(tmp_path):
    def attempt(index):
        def hook(system, messages, tools):
            speed = 1.0 if index < 3 else 4.0  # two no-gain candidates, then the supervised direction
            return turn(("write_file", {"path": "kernel.py", "content": kernel(speed, f"# try {index}\n")}),
                        ("note", {"text": f"tried {index}"}), ("evaluate", {"rationale": f"try {index}"}),
                        usage=(2000 * len(messages), 10))  # grows with the conversation
        return hook

    review = turn(text="Stop tuning SPEED by tiny steps; checkout best and try 4.0.")
    model = ScriptedModel([attempt(i) for i in range(1, 8)], reviews=[review])
    flags = {"agent.context_limit_tokens": 6000, "agent.supervisor_after": 2, "budget.max_candidates": 4}
    done = evolve(fake_session(tmp_path, model, flags=flags)[0])
    assert done.code == 0, done.out
    kinds = [e["kind"] for e in done.run.events()]
    assert "context_reset" in kinds and "supervisor" in kinds
    asked = next(i for i, (_, _, tools) in enumerate(model.requests) if not tools)
    assert "supervisor" in model.requests[asked][0].lower()
    assert "try 4.0" in model.requests[asked + 1][1][-1].text  # the review reached the agent
    restarts = [messages for _, messages, tools in model.requests if tools and len(messages) == 1
                and "summary" in messages[0].text]
    assert restarts, "no request started from a summary"
    summary = restarts[0][0].text
    assert "SPEED =" in summary and "c0000" in summary and "tried" in summary  # best source, lineage, notes
    assert len(done.run.lineage) == 5 and done.run.load_eval(done.run.lineage.best).fitness == 4.0


def test_an_api_refusal_as_too_long_restarts_the_conversation(tmp_path):
    model = ScriptedModel([turn(("list_files", {})), ContextOverflow("prompt is too long: 210000 tokens"),
                           turn(("note", {"text": "after the restart"}))])
    done = evolve(fake_session(tmp_path, model)[0])
    reset = next(e for e in done.run.events() if e["kind"] == "context_reset")
    assert "refused the conversation as too long" in reset["reason"]
    assert len(model.requests[2][1]) == 1  # asked again from the summary alone
    assert "replayed" not in done.run.events()[-1]["reason"] and "ran out" in done.run.events()[-1]["reason"]


def test_a_suspicious_result_needs_a_clean_rerun(tmp_path):
    evaluator = FakeEvaluator(suspicious_once=True)
    model = ScriptedModel([turn(("write_file", {"path": "kernel.py", "content": kernel(12.0)}),
                                ("evaluate", {"rationale": "too good"}))])
    done = evolve(fake_session(tmp_path, model, evaluator=evaluator, flags={"budget.max_candidates": 1})[0])
    assert done.code == 0
    assert evaluator.calls == ["evaluate", "evaluate", "confirm"] and done.run.lineage.best == "c0001"
    result = next(e for e in done.run.events() if e["kind"] == "tool_result" and e["name"] == "evaluate")
    assert result["data"]["suspicious"] and result["data"]["confirm"]["candidate"]["suspicious"] is False


def test_replay_re_drives_a_recorded_run(tmp_path):
    steps = [turn(("write_file", {"path": "kernel.py", "content": kernel(1.0 + 0.5 * (i + 1))}),
                  ("evaluate", {"rationale": f"step {i}"}), model="claude-sonnet-5-5") for i in range(4)]
    seed = write_seed(tmp_path / "seed")
    recorded = evolve(fake_session(tmp_path / "a", ScriptedModel(steps), seed=seed,
                                   flags={"budget.max_candidates": 2})[0]).run
    session, _, lines = fake_session(tmp_path / "b", seed=seed,
                                     flags={"agent.kind": "replay", "agent.replay_from": str(recorded.path)})
    done = evolve(session, lines=lines)
    assert done.code == 0, done.out
    assert "agent: replay, model replay:claude-sonnet-5-5" in done.out
    assert [(i.status, i.fitness, i.rationale) for i in done.run.lineage.log()] == \
        [(i.status, i.fitness, i.rationale) for i in recorded.lineage.log()]
    assert "replayed every recorded turn" in done.run.events()[-1]["reason"]


def test_resuming_a_run_an_older_avo_wrote_names_the_settings_it_ignores(tmp_path):
    first = evolve(fake_session(tmp_path, flags={"agent.kind": "heuristic", "budget.max_candidates": 1})[0])
    assert first.code == 0
    info = json.loads((first.run.path / "run.json").read_text())
    info["config"]["evaluation"]["preheat_ms"] = 1000.0  # a setting an earlier version had
    (first.run.path / "run.json").write_text(json.dumps(info))
    session, run, lines = fake_session(tmp_path, flags={"budget.max_candidates": 2}, resume=first.run.id)
    done = evolve(session, run, lines)
    assert done.code == 0, done.out
    assert f"resuming run {run.id}" in done.out and "no longer has were ignored: evaluation.preheat_ms" in done.out
    assert Run.open(run.id, tmp_path / "runs").info()["state"] == "finished"
