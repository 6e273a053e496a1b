"""The whole product on the CPU: `avo evolve --kernel gemm --device interpret` with the real task, seed and
evaluator (Triton interpreter), driven by a model behind the real Anthropic SDK and a loopback server."""

from __future__ import annotations


import pytest

from agent_loopback import Loopback, anthropic_turn, sequence
from avo.cli import main
from avo.run.directory import Run

pytestmark = pytest.mark.slow


def test_evolve_gemm_under_the_interpreter(tmp_path, monkeypatch, capsys):
    script = [
        anthropic_turn(("list_files", {}), ("read_file", {"path": "kernel.py"}), text="Observe the seed."),
        anthropic_turn(("edit_file", {"path": "kernel.py", "old": "NUM_STAGES = 3", "new": "NUM_STAGES = 2"}),
                       ("evaluate", {"rationale": "fewer stages: less shared memory; expect about the same speed"})),
        anthropic_turn(("lineage", {"limit": 5}), ("diff", {"a": "baseline", "b": "workspace"})),
    ]
    with Loopback(sequence(script)) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-key-for-loopback")
        code = main(["evolve", "--kernel", "gemm", "--device", "interpret", "--gpu", "h200", "--hours", "1",
                     "--max-candidates", "1", "--agent", "anthropic", "--runs-dir", str(tmp_path / "runs"),
                     "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    run = Run.open("latest", tmp_path / "runs")
    log = run.lineage.log()
    assert [i.cid for i in log] == ["c0001", "c0000"] and log[0].parent == "c0000"
    assert all(i.status == "correct" for i in log), [i.summary for i in log]
    evaluated = run.load_eval("c0001")
    assert evaluated.timing_source == "interpreter" and evaluated.fitness > 0
    assert "NUM_STAGES = 2" in run.lineage.diff("c0000", "c0001")
    assert len(server.requests) == 2  # the candidate budget ended the run after the evaluation
    first_read = server.requests[1]["body"]["messages"][2]["content"]
    assert any("def gemm" in str(block.get("content")) for block in first_read)
    assert run.info()["state"] == "finished"
