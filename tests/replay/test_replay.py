"""`avo replay` on a run assembled in the agent loop's transcript shape: timeline, one step, follow, bad input."""

from __future__ import annotations

import pytest
import torch
from replay_runs import gpu_shaped_run

from avo.replay import view as replay_view
from avo.cli import main
from avo.config import RunConfig
from avo.replay.timeline import Timeline, build
from avo.run.directory import Run

HAS_GPU = torch.cuda.is_available()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    runs = tmp_path_factory.mktemp("replay") / "runs"
    gpu_shaped_run(runs).close()
    return runs


def avo(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_steps_are_classified_and_carry_the_best_so_far(runs):
    run = Run.open("gpu-shaped", runs)
    timeline, items = build(run.events())
    steps = timeline.steps
    assert [s.phase for s in steps] == ["observe", "act", "act", "act", "act", "decide"]
    assert [(s.best_cid, s.best_fitness) for s in steps] == [
        ("c0000", 0.70), ("c0000", 0.70), ("c0002", 0.85), ("c0002", 0.85), ("c0004", 0.93), ("c0004", 0.93)]
    assert [e["cid"] for s in steps for e in s.evaluations] == ["c0001", "c0002", "c0003", "c0004"]
    markers = [i.kind for i in items if not hasattr(i, "phase")]
    assert markers == ["baseline", "session", "supervisor", "context_reset", "stop"]
    assert all(s.complete for s in steps)


def test_note_only_and_checkout_only_turns_are_orient_and_decide():
    timeline = Timeline()
    for name, phase in (("note", "orient"), ("checkout", "decide"), ("search_docs", "observe"),
                        ("write_file", "act")):
        timeline.feed({"kind": "model_turn", "text": "", "tool_calls": [{"id": name, "name": name}]})
        done = timeline.feed({"kind": "tool_result", "id": name, "name": name, "content": "ok"})
        assert [s.phase for s in done] == [phase]


def test_a_confirmation_inside_an_evaluate_stays_in_its_step():
    """A new best is confirmed between the evaluate's call and its result: the step stays one (its rationale and
    result together), and the confirmation's markers follow it."""
    events = [{"kind": "model_turn", "text": "try", "tool_calls": [{"id": "e", "name": "evaluate",
                                                                  "arguments": {"rationale": "BLOCK_K 64"}}]},
              {"kind": "tool_call", "id": "e", "name": "evaluate", "arguments": {"rationale": "BLOCK_K 64"}},
              {"kind": "confirm_start", "cid": "c0001", "against": "c0000"},
              {"kind": "confirm_end", "cid": "c0001", "accepted": True},
              {"kind": "tool_result", "id": "e", "name": "evaluate", "content": "c0001: correct",
               "data": {"cid": "c0001", "status": "correct", "best_cid": "c0001", "best_fitness": 1.2}}]
    timeline, items = build(events)
    assert len(timeline.steps) == 1
    step, *markers = items
    assert step is timeline.steps[0] and step.calls[0].arguments == {"rationale": "BLOCK_K 64"}
    assert step.evaluations[0]["cid"] == "c0001"
    assert [m.kind for m in markers] == ["confirm_start", "confirm_end"]


def test_a_stop_inside_a_turn_whose_last_calls_never_ran_ends_its_step_live():
    """The run stops (its budget) before a turn's second call: the stop is not held for a result that never comes,
    so `avo replay --follow`, which returns at the stop, prints the step and the stop."""
    timeline = Timeline()
    events = [{"kind": "model_turn", "text": "two", "tool_calls": [{"id": "w", "name": "write_file", "arguments": {}},
                                                                   {"id": "e", "name": "evaluate", "arguments": {}}]},
              {"kind": "tool_call", "id": "w", "name": "write_file", "arguments": {}},
              {"kind": "tool_result", "id": "w", "name": "write_file", "content": "written"},
              {"kind": "stop", "status": "finished", "reason": "candidate budget of 3 spent"}]
    items = [item for event in events for item in timeline.feed(event)]
    assert [type(i).__name__ for i in items] == ["Step", "Marker"] and items[1].kind == "stop"


def test_timeline_shows_phases_calls_rationale_results_and_best(runs, capsys):
    code, out, _ = avo(capsys, "replay", "gpu-shaped", "--runs-dir", runs)
    assert code == 0
    assert "task gemm" in out and "h200" in out
    step3 = next(line for line in out.splitlines() if line.strip().startswith("3 "))
    assert "act" in step3 and "edit_file(kernel.py)" in step3 and "best c0002 0.85" in step3
    assert "Bigger tiles: more reuse of each loaded tile." in out
    assert "→ c0002 correct, fitness 0.85  ACCEPTED" in out
    assert "→ c0001 rejected static.library_call: kernel.py:3 calls torch.matmul" in out
    assert "→ c0003 incorrect check.mismatch" in out
    assert "supervisor review: Stalled on tile sizes" in out
    assert "context reset at 0:15:00" in out
    assert "stop (finished) at 0:25:11: cost budget of $0.25 spent" in out
    assert "6 steps, 4 evaluations; best c0004 fitness 0.93" in out


def test_one_step_in_full(runs, capsys):
    code, out, _ = avo(capsys, "replay", "gpu-shaped", "--step", "3", "--runs-dir", runs)
    assert code == 0
    assert "step 3 of 6 · act" in out and "16000 in / 500 out tokens" in out
    assert '"old": "BLOCK_M = 64"' in out and '"new": "BLOCK_M = 128"' in out  # arguments in full
    assert "c0002: accepted" in out  # the tool's answer
    assert "4096x4096x4096" in out and "595" in out  # the evaluation's cases table
    assert "best after this step: c0002 fitness 0.85" in out


@pytest.mark.parametrize("args, message", [
    (["replay", "no-such-run"], "unknown run 'no-such-run'"),
    (["replay", "gpu-shaped", "--step", "7"], "step 7 is out of range: run gpu-shaped has 6 steps (1 to 6)"),
    (["replay", "gpu-shaped", "--step", "0"], "step 0 is out of range"),
    (["replay", "gpu-shaped", "--step", "2", "--follow"], "--step and --follow cannot be combined"),
    (["replay", "gpu-shaped", "--all"], "--all goes with --rebench"),
    (["replay", "gpu-shaped", "--device", "cuda"], "--device and --gpu go with --rebench or --redrive"),
    (["replay", "gpu-shaped", "--rebench", "--device", "tpu"], "unknown device 'tpu'"),
])
def test_bad_input_is_one_line_and_exit_2(runs, capsys, args, message):
    code, out, err = avo(capsys, *args, "--runs-dir", runs)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.skipif(HAS_GPU, reason="on a GPU machine this would re-score the run for real")
def test_rebench_of_a_gpu_run_without_a_gpu_says_what_to_do(runs, capsys):
    code, _, err = avo(capsys, "replay", "gpu-shaped", "--rebench", "--runs-dir", runs)
    assert code == 2 and "no NVIDIA GPU found" in err and "--device interpret" in err


def test_follow_on_a_stopped_run_prints_it_and_returns(runs, capsys):
    code, out, _ = avo(capsys, "replay", "gpu-shaped", "--follow", "--runs-dir", runs)
    assert code == 0
    assert "→ c0004 correct, fitness 0.93  ACCEPTED" in out and out.rstrip().endswith("the run had already stopped")


def test_follow_prints_steps_of_a_live_run_as_they_complete(tmp_path, capsys):
    run = Run.create(RunConfig(kernel="gemm", device="interpret"), runs_dir=tmp_path, gpu="h200",
                     agent="heuristic", run_id="live")
    run.append_event("session", agent="heuristic", resumed=False)
    later = [("model_turn", {"text": "Read the kernel.", "tool_calls": [{"id": "a", "name": "read_file",
                                                                        "arguments": {"path": "kernel.py"}}],
                             "elapsed_s": 5.0}),
             ("tool_call", {"id": "a", "name": "read_file", "arguments": {"path": "kernel.py"}}),
             ("tool_result", {"id": "a", "name": "read_file", "content": "kernel.py (3 lines)", "is_error": False}),
             ("stop", {"state": "finished", "reason": "candidate budget of 1 spent", "elapsed_s": 6.0})]
    polls = []

    def sleep(_seconds):  # the transcript grows between polls, one event at a time, as a live run's does
        polls.append(1)
        assert len(polls) < 200, "follow did not end after the stop event"
        if later:
            kind, data = later.pop(0)
            run.append_event(kind, **data)

    console = replay_view.console_for()
    why = replay_view.follow(run, console, poll_s=0.0, sleep=sleep)
    out = capsys.readouterr().out
    assert why == "the run stopped"
    assert "following; Ctrl-C to stop watching" in out
    assert "observe  read_file(kernel.py)" in out and "Read the kernel." in out
    assert out.index("read_file(kernel.py)") < out.index("stop (finished) at 0:00:06")


def test_follow_refuses_a_torn_line_in_the_middle_as_plain_replay_does(tmp_path, capsys):
    run = Run.create(RunConfig(kernel="gemm", device="interpret"), runs_dir=tmp_path, gpu="h200",
                     agent="heuristic", run_id="torn")
    run.append_event("session", agent="heuristic", resumed=False)
    with open(run.transcript_path, "a") as handle:
        handle.write('{"kind": "model_turn", "text": "cut sho\n')
    run.append_event("stop", state="finished", reason="done", elapsed_s=1.0)
    for args in (["replay", "torn"], ["replay", "torn", "--follow"]):
        code, _, err = avo(capsys, *args, "--runs-dir", tmp_path)
        assert code == 2 and "line 2 is not valid JSON" in err and len(err.strip().splitlines()) == 1


def test_follow_reads_on_after_a_torn_last_line_is_replaced(tmp_path, capsys):
    run = Run.create(RunConfig(kernel="gemm", device="interpret"), runs_dir=tmp_path, gpu="h200",
                     agent="heuristic", run_id="resumed")
    run.append_event("session", agent="heuristic", resumed=False)
    with open(run.transcript_path, "a") as handle:  # the process died writing this line
        handle.write('{"kind": "model_turn", "text": "cut sho')
    polls = []

    def sleep(_seconds):  # then a resumed process truncates the torn line and writes on
        polls.append(1)
        assert len(polls) < 50, "follow did not see the resumed run's stop"
        if len(polls) == 2:
            resumed = Run.open("resumed", tmp_path)
            resumed.append_event("session", agent="heuristic", resumed=True)
            resumed.append_event("stop", state="finished", reason="budget spent", elapsed_s=2.0)

    why = replay_view.follow(run, replay_view.console_for(), poll_s=0.0, sleep=sleep)
    assert why == "the run stopped" and "stop (finished)" in capsys.readouterr().out
