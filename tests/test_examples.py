"""The example runs shipped in runs/examples/ (real heuristic-agent evolves on an H200) import, replay and report on
a machine without a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib import image

from avo.cli import main
from avo.run.directory import Run

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "runs" / "examples").glob("*.avo.tar"))


def avo(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_both_tasks_ship_an_example():
    assert {p.name.split("-")[0] for p in EXAMPLES} == {"attention", "gemm", "kernelbench"}


@pytest.mark.parametrize("export", EXAMPLES, ids=lambda p: p.name)
def test_shipped_example_imports_replays_and_reports(export, tmp_path, capsys):
    runs = tmp_path / "runs"
    code, out, err = avo(capsys, "import", export, "--runs-dir", runs)
    assert code == 0, err
    run_id = next(runs.iterdir()).name
    run = Run.open(run_id, runs)
    best = run.lineage.best
    assert best is not None and run.load_eval(best).timing_source == "gpu"

    code, out, err = avo(capsys, "replay", run_id, "--runs-dir", runs)
    assert code == 0, err
    assert "baseline c0000: correct" in out and "stop (finished)" in out
    # A run from a strong seed may end with the seed still best (the cuda_wgmma evolve): then nothing is accepted.
    assert ("ACCEPTED" in out) == (best != run.lineage.baseline), best

    code, out, err = avo(capsys, "report", run_id, "--runs-dir", runs)
    assert code == 0, err
    report = runs / run_id / "report"
    markdown = (report / "report.md").read_text()
    assert f"| best | **{best}**, fitness " in markdown and "NVIDIA H200" in markdown
    for name in ("fitness.png", "cases.png", "status.png"):
        pixels = image.imread(report / name)
        assert (report / name).stat().st_size > 15_000 and pixels[..., :3].std() > 0.05, name
