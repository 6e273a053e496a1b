"""Replay and report on a real run (`avo evolve` under the Triton interpreter): timeline, one step, re-bench,
re-drive, and the same on the run exported and imported into a fresh runs folder (how example runs ship)."""

from __future__ import annotations

import json

import pytest
from matplotlib import image
from replay_runs import copy_run, tiny_real_run

from avo.cli import main
from avo.replay.timeline import build
from avo.replay.rebench import choose
from avo.run.directory import Run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_real_run(tmp_path_factory.mktemp("tiny"))


def avo(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_timeline_of_a_real_run(tiny, capsys):
    runs, run_id = tiny
    code, out, _ = avo(capsys, "replay", run_id, "--runs-dir", runs)
    assert code == 0
    assert "interpreter timings" in out and "agent heuristic" in out
    assert "baseline c0000: correct" in out
    run = Run.open(run_id, runs)
    for cid in ("c0001", "c0002"):
        result = run.load_eval(cid)
        shown = f"correct, fitness {result.fitness:.4g}" if result.ok else result.status
        assert f"→ {cid} {shown}" in out
    evaluate_steps = [line for line in out.splitlines() if " act " in line and "evaluate" in line]
    assert len(evaluate_steps) == 2, "\n".join(out.splitlines())
    assert "stop (finished)" in out and "candidate budget of 2 spent" in out
    assert "[interpreter]" in out


def test_one_step_of_a_real_run(tiny, capsys):
    runs, run_id = tiny
    timeline, _ = build(Run.open(run_id, runs).events())
    number = next(s.number for s in timeline.steps if s.evaluations)
    code, out, _ = avo(capsys, "replay", run_id, "--step", number, "--runs-dir", runs)
    assert code == 0
    assert f"step {number} of {len(timeline.steps)} · act" in out
    assert '"rationale":' in out and "c0001 (parent c0000)" in out
    assert "c0001 per case (interpreter timing)" in out and "130x257x70_fp16" in out


def test_rebench_shows_recorded_vs_now_under_the_interpreter(tiny, capsys):
    runs, run_id = tiny
    run = Run.open(run_id, runs)
    accepted = choose(run, everything=False)
    assert accepted[0] == "c0000" and choose(run, everything=True) == ["c0000", "c0001", "c0002"]
    code, out, err = avo(capsys, "replay", run_id, "--rebench", "--runs-dir", runs)
    assert code == 0, err
    assert f"re-scoring c0000 (1 of {len(accepted)}) on the Triton interpreter" in err
    assert "recorded fitness [interpreter]" in out and "now fitness [interpreter]" in out
    row = next(line for line in out.splitlines() if line.startswith("│ c0000"))
    recorded, now, ratio = [cell.strip() for cell in row.split("│")[3:6]]
    assert float(recorded) == pytest.approx(run.load_eval("c0000").fitness, rel=1e-3)
    assert float(now) > 0 and float(ratio) == pytest.approx(float(now) / float(recorded), rel=0.01)
    assert "c0000 per case: recorded [interpreter] vs now [interpreter]" in out
    assert "tiny/130x257x70_fp16" in out


def test_redrive_replays_the_recorded_turns_as_a_new_run(tiny, tmp_path, capsys):
    runs, run_id = copy_run(*tiny, tmp_path / "runs"), tiny[1]
    transcript = runs / run_id / "transcript.jsonl"
    events = [json.loads(line) for line in transcript.read_text().splitlines()]
    first_eval = next(i for i, e in enumerate(events) if e["kind"] == "tool_result" and e["name"] == "evaluate")
    # only the turns up to the first evaluation: one candidate is enough to show the turns drive a new run
    transcript.write_text("".join(json.dumps(e) + "\n" for e in events[:first_eval + 1]))
    code, out, _ = avo(capsys, "replay", run_id, "--redrive", "--quiet", "--runs-dir", runs)
    assert code == 0, out
    assert "replayed every recorded turn" in out
    fresh = Run.open("latest", runs)
    assert fresh.id != run_id and fresh.info()["agent"] == "replay:heuristic"
    log = fresh.lineage.log()
    assert [c.cid for c in log] == ["c0001", "c0000"]
    original = Run.open(run_id, runs).lineage
    assert fresh.lineage.diff("c0000", "c0001") == original.diff("c0000", "c0001")  # the same recorded edit
    assert fresh.load_eval("c0001").timing_source == "interpreter"


def test_an_exported_run_replays_and_reports_after_import(tiny, tmp_path, capsys):
    runs, run_id = tiny
    export = tmp_path / f"{run_id}.tar"
    assert avo(capsys, "export", run_id, "-o", export, "--runs-dir", runs)[0] == 0
    fresh = tmp_path / "fresh-runs"
    assert avo(capsys, "import", export, "--runs-dir", fresh)[0] == 0
    code, out, _ = avo(capsys, "replay", run_id, "--runs-dir", fresh)
    assert code == 0
    _, original, _ = avo(capsys, "replay", run_id, "--runs-dir", runs)
    assert out.splitlines()[1:] == original.splitlines()[1:]  # only the header's state may differ
    assert avo(capsys, "report", run_id, "--runs-dir", fresh)[0] == 0
    report = fresh / run_id / "report"
    best = Run.open(run_id, fresh).lineage.best
    md = (report / "report.md").read_text()
    assert f"| best | **{best}**, fitness " in md and "interpreter (Triton on CPU" in md
    for name in ("fitness.png", "cases.png", "status.png"):
        pixels = image.imread(report / name)
        assert (report / name).stat().st_size > 15_000 and pixels.shape[1] == 1200 and pixels[..., :3].std() > 0.05


@pytest.mark.gpu
def test_rebench_of_an_interpreter_run_on_the_gpu(tiny, capsys):
    runs, run_id = tiny
    baseline = Run.open(run_id, runs).load_eval("c0000")
    assert baseline.ok and baseline.versions["gpu_device"] == "none (interpreter)", baseline.message
    code, out, err = avo(capsys, "replay", run_id, "--rebench", "--device", "cuda", "--runs-dir", runs)
    assert code == 0, err
    assert "recorded fitness [interpreter]" in out and "now fitness [gpu " in out
    assert "recorded and new timings come from different sources" in out
