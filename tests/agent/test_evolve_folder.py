"""`avo evolve --kernel DIR`: one heuristic run per real KernelBench problem under the interpreter, a row with its
reason for the problems that cannot be evolved, a summary with fast_p, and the same command again resumes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from avo.cli import main
from avo.run.directory import Run

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kernelbench"


def test_a_folder_evolve_runs_each_problem_once_and_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AVO_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "problems"
    folder.mkdir()
    shutil.copy(EXAMPLES / "problems" / "25_Swish.py", folder)
    shutil.copy(EXAMPLES / "problems" / "25_Swish.py", folder / "30_Unseeded.py")
    (folder / "7_Broken.py").write_text("raise RuntimeError('broken on purpose')\n")
    runs = tmp_path / "runs"
    args = ["evolve", "--kernel", str(folder), "--seed-kernel", str(EXAMPLES / "solutions"), "--agent", "heuristic",
            "--device", "interpret", "--max-candidates", "1", "--hours-per-problem", "0.2", "--runs-dir", str(runs),
            "--quiet", "--sweep-id", "kb"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "[1/3] 7_Broken: run kb-7_Broken" in out and "fast_0 0.33" in out
    data = json.loads((runs / "kb-sweep.json").read_text())
    rows = {r["problem"]: r for r in data["rows"]}
    assert list(rows) == ["7_Broken", "25_Swish", "30_Unseeded"]
    assert rows["7_Broken"]["status"] == "load_error" and "broken on purpose" in rows["7_Broken"]["reason"]
    assert rows["30_Unseeded"]["status"] == "failed"
    assert "the heuristic agent only tunes `# avo: tune` knobs" in rows["30_Unseeded"]["reason"]
    swish = rows["25_Swish"]
    assert swish["correct"] and swish["fitness"] > 0 and swish["run"] == "kb-25_Swish"
    assert swish["extra"]["baseline_fitness"] > 0 and swish["extra"]["best"]
    run = Run.open("kb-25_Swish", runs)
    assert run.info()["state"] == "finished" and run.config.budget.hours == 0.2
    assert run.config.seed_kernel == str(EXAMPLES / "solutions" / "25_Swish")
    assert sorted(p.name for p in runs.iterdir() if (p / "run.json").is_file()) == ["kb-25_Swish"]
    assert data["fast_p"]["0"] == round(1 / 3, 4) and data["max_candidates"] == 1

    candidates = len(run.lineage)
    assert main(args) == 0  # again: the finished run is read back, not evolved further
    out = capsys.readouterr().out
    assert "evaluating the seed" not in out and "resuming" not in out
    assert len(Run.open("kb-25_Swish", runs).lineage) == candidates
    assert json.loads((runs / "kb-sweep.json").read_text())["rows"] == data["rows"]


def test_folder_only_flags_and_hours_are_one_line_errors(tmp_path, capsys):
    assert main(["evolve", "--kernel", "gemm", "--hours-per-problem", "1"]) == 2
    assert "--hours-per-problem and --sweep-id go with --kernel DIR" in capsys.readouterr().err
    (tmp_path / "1_A.py").write_text("")
    assert main(["evolve", "--kernel", str(tmp_path), "--hours", "1"]) == 2
    assert "use --hours-per-problem" in capsys.readouterr().err
