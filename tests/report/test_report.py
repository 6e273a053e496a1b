"""`avo report` on a run with GPU timings, several accepted steps, failures, and model usage."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib import image
from replay_runs import gpu_shaped_run

from avo.cli import main
from avo.config import RunConfig
from avo.report.build import gather
from avo.run.directory import Run

FIGURES = ("fitness.png", "cases.png", "status.png")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    runs = tmp_path_factory.mktemp("report") / "runs"
    gpu_shaped_run(runs).close()
    assert main(["report", "gpu-shaped", "--runs-dir", str(runs)]) == 0
    return runs / "gpu-shaped" / "report"


def assert_real_figure(path, width: int, min_height: int) -> None:
    """A PNG of the expected size that holds a drawing: not blank, not one flat colour."""
    assert path.stat().st_size > 15_000, f"{path.name} is only {path.stat().st_size} bytes"
    pixels = image.imread(path)[..., :3]
    assert pixels.shape[1] == width and pixels.shape[0] >= min_height, pixels.shape
    assert pixels.std() > 0.05, f"{path.name} looks blank"
    inked = (pixels.mean(axis=2) < 0.9).mean()
    assert 0.02 < inked < 0.9, f"{path.name}: {inked:.1%} of pixels are drawn on"
    colours = {tuple(p) for p in (pixels[::7, ::7] * 20).round().reshape(-1, 3)}
    assert len(colours) > 10, f"{path.name} has almost no colours: {len(colours)}"


def test_figures_are_real_pictures(report):
    assert_real_figure(report / "fitness.png", 1200, 800)
    assert_real_figure(report / "cases.png", 1200, 400)
    assert_real_figure(report / "status.png", 1200, 350)


def test_fitness_figure_marks_accepted_steps_in_green(report):
    pixels = image.imread(report / "fitness.png")[..., :3]
    green = (pixels[..., 1] > 0.55) & (pixels[..., 0] < 0.35) & (pixels[..., 2] < 0.5)  # the accepted colour
    assert green.sum() > 500


def test_markdown_summary(report):
    md = (report / "report.md").read_text()
    assert "| best | **c0004**, fitness 0.93 (geomean speedup vs cuBLAS) |" in md
    assert "| baseline | c0000, fitness 0.7 |" in md
    assert "| best / baseline | 1.329x |" in md
    assert "timed on GPU h200 (CUDA events)" in md  # provenance
    assert "| agent | anthropic:claude-sonnet-test |" in md
    assert "| budget used | 0:25:11 of 2 h, 4 candidates, $0.27 |" in md
    assert "### c0002: fitness 0.85, 1.214x over c0000" in md
    assert " kernel.py | 4 ++--" in md  # the diff stat of the step, from the lineage
    assert "> NUM_STAGES 3 -> 4: hide load latency" in md
    assert "| rejected | static.library_call | 1 |" in md and "| incorrect | check.mismatch | 1 |" in md
    assert "| 4096x4096x4096 | 650 | 490 | 700 | 0.9286 |" in md
    assert "| 7 | 78500 | 1570 | 0 | 0 | 0.27 |" in md
    for figure in FIGURES:
        assert f"]({figure})" in md


def test_gathered_points_follow_the_lineage_and_transcript(tmp_path):
    run = gpu_shaped_run(tmp_path / "runs")
    data = gather(run)
    assert [(p.cid, p.status, p.accepted) for p in data.points] == [
        ("c0000", "correct", True), ("c0001", "rejected", False), ("c0002", "correct", True),
        ("c0003", "incorrect", False), ("c0004", "correct", True)]
    assert [p.elapsed_s for p in data.points] == [0.0, 90, 400, 800, 1500]
    assert data.status_counts[0] == (("correct", None), 3)


def test_output_folder_option(tmp_path, capsys):
    gpu_shaped_run(tmp_path / "runs").close()
    code = main(["report", "gpu-shaped", "--runs-dir", str(tmp_path / "runs"), "-o", str(tmp_path / "out")])
    assert code == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted([*FIGURES, "report.md"])
    assert str(tmp_path / "out" / "report.md") in capsys.readouterr().out


def test_a_run_without_candidates_is_one_line_exit_2(tmp_path, capsys):
    Run.create(RunConfig(kernel="gemm"), runs_dir=tmp_path, gpu="h200", agent="heuristic", run_id="empty").close()
    assert main(["report", "empty", "--runs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "run empty has no candidates yet" in err and len(err.strip().splitlines()) == 1
    assert main(["report", "missing", "--runs-dir", str(tmp_path)]) == 2
    assert "unknown run 'missing'" in capsys.readouterr().err


def test_nothing_correct_still_reports(tmp_path):
    from lineage_fakes import result, write_candidate

    run = Run.create(RunConfig(kernel="gemm"), runs_dir=tmp_path, gpu="h200", agent="heuristic", run_id="bad")
    with run.lock():
        write_candidate(tmp_path / "src", "x = 1\n")
        run.lineage.commit(tmp_path / "src", parent=None, result=result("crash", rule="crash"), model="seed",
                           rationale="seed")
        run.lineage.tag_baseline("c0000")
    assert main(["report", "bad", "--runs-dir", str(tmp_path)]) == 0
    md = (run.report_dir / "report.md").read_text()
    assert "| best | none: no correct candidate |" in md and "| crash | crash | 1 |" in md
    assert "No candidate was accepted." in md
    assert np.asarray(image.imread(run.report_dir / "cases.png")).std() > 0.01  # says why it is empty
