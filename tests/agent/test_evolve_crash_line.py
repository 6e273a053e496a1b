"""`avo evolve` stopped by a seed that raises: its one line names the exception's type and message (it once ended at
"raised:"), as does the baseline's EvalResult. The real evaluator, under the interpreter."""

from __future__ import annotations

import pytest

from avo.cli import main
from avo.run.directory import Run

KNOB = "BLOCK = 64  # avo: tune 32 64\n\n\n"
SEEDS = {
    "RuntimeError": ("def gemm(a, b):\n    raise RuntimeError()\n", "raised: RuntimeError; run "),
    "ValueError": ("def gemm(a, b):\n    raise ValueError('while multiplying:\\n  a is (1, 1)\\n'\n"
                   "                     'inner dimensions differ')\n",
                   "raised: ValueError: inner dimensions differ; run "),
}


pytestmark = pytest.mark.slow


@pytest.mark.parametrize("kind", SEEDS)
def test_a_raising_seed_stops_evolve_naming_the_exception(kind, tmp_path, capsys):
    source, said = SEEDS[kind]
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "kernel.py").write_text(KNOB + source)
    runs = tmp_path / "runs"
    code = main(["evolve", "--kernel", "gemm", "--device", "interpret", "--seed-kernel", str(seed), "--agent",
                 "heuristic", "--max-candidates", "2", "--runs-dir", str(runs), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"failed evaluation (crash): crash: case 1x1x1_fp16 {said}" in err, err
    baseline = Run.open("latest", runs).load_eval("c0000")
    assert baseline.status == "crash"
    assert baseline.message.splitlines()[0] == f"case 1x1x1_fp16 {said.removesuffix('; run ')}"
