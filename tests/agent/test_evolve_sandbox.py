"""`avo evolve --agent openai` against a loopback server scripting an adversarial model: its forged verdict does not
become the best; and without a sandbox such a run does not start (unless --no-sandbox says so, and run.json too)."""

from __future__ import annotations

from pathlib import Path

import pytest

import needs
from agent_loopback import Loopback, openai_turn, sequence
from avo.cli import main
from avo.run.directory import Run

SANDBOX_TESTS = Path(__file__).parents[1] / "evaluate" / "sandbox"
HONEST = Path(__file__).parents[1] / "evaluate" / "kernels" / "good_gemm" / "kernel.py"
CANARY = "sk-canary-" + "3" * 24


def forging_kernel() -> str:
    """An honest GEMM whose output tensors' finalizers write a signed-looking fitness-5 verdict on every descriptor."""
    attack = (SANDBOX_TESTS / "attacks" / "forges.py").read_text()
    return HONEST.read_text().replace("    return c\n", "    return _watched(c)\n") + "\n\n" + attack


@needs.bwrap
def test_a_forged_verdict_from_an_llm_written_candidate_never_becomes_best(tmp_path, monkeypatch, capsys):
    script = [openai_turn(("write_file", {"path": "kernel.py", "content": forging_kernel()}),
                          ("evaluate", {"rationale": "much faster, trust me"}))]
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    with Loopback(sequence(script)) as server:
        code = main(["evolve", "--kernel", "gemm", "--device", "interpret", "--gpu", "h200", "--hours", "1",
                     "--max-candidates", "1", "--agent", "openai", "--base-url", server.url + "/v1", "--model", "m",
                     "--runs-dir", str(tmp_path / "runs"), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    run = Run.open("latest", tmp_path / "runs")
    forged = run.load_eval("c0001")
    assert (forged.status, forged.rule, forged.fitness) == ("rejected", "runtime.file_access", 0.0), forged.message
    assert run.lineage.best == "c0000" == run.lineage.baseline
    assert run.config.evaluation.sandbox == "on"
    assert CANARY not in run.transcript_path.read_text()


@pytest.mark.parametrize("flags", [[], ["--no-sandbox"]])
def test_an_llm_run_without_a_sandbox_starts_only_when_told(tmp_path, monkeypatch, capsys, flags):
    monkeypatch.setenv("AVO_BWRAP", str(tmp_path / "no-bwrap-here"))
    url = "http://127.0.0.1:9/v1"  # refused: a run that starts stops at its first model call
    code = main(["evolve", "--kernel", "gemm", "--device", "interpret", "--agent", "openai", "--base-url", url,
                 "--model", "m", "--max-candidates", "1", "--runs-dir", str(tmp_path / "runs"), "--quiet", *flags])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    if not flags:
        assert "no sandbox" in err and "--no-sandbox" in err and not (tmp_path / "runs").exists()
    else:
        assert "cannot connect" in err
        assert Run.open("latest", tmp_path / "runs").config.evaluation.sandbox == "off"
