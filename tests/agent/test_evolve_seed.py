"""`avo evolve` with a seed it cannot evolve: one line, exit 2, before any candidate budget is spent. A seed that fails
a guard (the real evaluator on a real KernelBench problem) or the check suite; a knob-less seed for the heuristic."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_fakes import SEED_SOURCE, FakeEvaluator, evolve as drive, fake_session, write_seed
from avo.cli import main
from avo.errors import UserError
from avo.run.directory import Run, list_runs

REPO = Path(__file__).resolve().parents[2]
PROBLEM = REPO / "examples" / "kernelbench" / "problems" / "12_Gemm_Multiply_LeakyReLU.py"
TWIN = REPO / "tests" / "evaluate" / "kb_cheats" / "12_Gemm_Multiply_LeakyReLU_layer_called"


def evolve(tmp_path: Path, capsys, *args: str) -> tuple[int, str, str]:
    code = main(["evolve", "--device", "interpret", "--hours", "1", "--max-candidates", "5", "--runs-dir",
                 str(tmp_path / "runs"), "--quiet", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_seed_that_fails_the_check_suite_stops_the_run_at_once(tmp_path):
    seed = write_seed(tmp_path / "seed")
    (seed / "kernel.py").write_text(SEED_SOURCE + "WRONG = 1\n")
    evaluator = FakeEvaluator()
    session, _, _ = fake_session(tmp_path, evaluator=evaluator, seed=seed, flags={"agent.kind": "heuristic"})
    with pytest.raises(UserError) as stopped:
        drive(session)
    message = str(stopped.value)
    assert "\n" not in message
    assert message.startswith(f"the seed {seed} failed the check suite: check.mismatch: case 64x64x64: ")
    assert "stopped before any candidate" in message
    assert f"avo bench {seed} --kernel 'gemm' --device interpret" in message
    assert evaluator.calls == ["evaluate"]
    run = list_runs(tmp_path / "runs")[-1]
    assert run.info()["state"] == "failed"
    assert [i.cid for i in run.lineage.log()] == ["c0000"]


def test_a_seed_that_fails_a_guard_stops_the_run_naming_rule_and_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AVO_CACHE_DIR", str(tmp_path / "cache"))
    code, out, err = evolve(tmp_path, capsys, "--kernel", str(PROBLEM), "--seed-kernel", str(TWIN), "--agent",
                            "heuristic")
    assert code == 2, out + err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert (f"the seed {TWIN} failed a guard: static.library_call: kernel.py:29 calls self.gemm, a torch.nn.Linear"
            in err)
    run = Run.open("latest", tmp_path / "runs")
    assert run.info()["state"] == "failed" and len(run.lineage) == 1


def test_the_heuristic_agent_with_a_seed_without_knobs_says_what_it_needs(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    seed = tmp_path / "plain"
    seed.mkdir()
    (seed / "kernel.py").write_text(SEED_SOURCE.replace("  # avo: tune 1.0 1.5 2.0", ""))
    code, out, err = evolve(tmp_path, capsys, "--kernel", "gemm", "--seed-kernel", str(seed))  # auto, no API key
    assert code == 2
    assert err.count("\n") == 1
    assert f"the heuristic agent only tunes `# avo: tune` knobs and {seed / 'kernel.py'} has none" in err
    assert "--seed-kernel" in err and "--agent anthropic" in err
    assert not list_runs(tmp_path / "runs")  # refused before any run, so before any evaluation


def test_a_knob_less_kernelbench_seed_is_refused_before_the_task_is_sized(tmp_path, monkeypatch, capsys):
    """Sizing a level-3 model (measuring sizes, running the smallest on the CPU) took 88 s on 36_LSTMHn before the
    heuristic's refusal, which needs only the seed's kernel.py."""
    from avo.tasks.kernelbench import task

    monkeypatch.setenv("AVO_CACHE_DIR", str(tmp_path / "cache"))
    sized: list[str] = []
    monkeypatch.setattr(task, "downsized", lambda *args: sized.append("downsized"))
    monkeypatch.setattr(task.KernelBenchTask, "preflight", lambda self, device: sized.append("preflight"))
    code, out, err = evolve(tmp_path, capsys, "--kernel", str(PROBLEM), "--agent", "heuristic")
    assert code == 2 and err.count("\n") == 1
    assert "the heuristic agent only tunes `# avo: tune` knobs and " in err and "has none" in err
    assert sized == [] and not (tmp_path / "runs").exists()
