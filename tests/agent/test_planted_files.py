"""A candidate that plants a hard link to a file outside, or a FIFO, in its folder while it runs: recorded as
`rejected` with what it planted, the entry removed (its target untouched), nothing of it committed, and the run goes
on. One evaluation at a time and batched on a pool; every run in a thread with a bounded join, so a regression that
blocks on the FIFO fails instead of hanging the suite."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import pytest

from agent_fakes import SEED_SOURCE, FakeEvaluator, fake_session
from agent_fakes import evolve as run_session
from agent_loopback import Loopback, anthropic_turn, sequence
from avo.agent.unsafe_files import RULE
from avo.evaluate.pool import EvalPool
from avo.run.directory import Run


class Planting(FakeEvaluator):
    """Scores like FakeEvaluator; a kernel saying `PLANT = "link"` (or "fifo") leaves one in its folder as it runs,
    and one saying `PLANT_ON_CONFIRM = 1` leaves a FIFO there during its side-by-side re-run."""

    def __init__(self, outside: Path, label: str = "cpu 0"):
        super().__init__()
        self.outside, self.worker, self.scored = outside, label, []

    def warm(self) -> None:
        pass

    def close(self) -> None:
        pass

    def _score(self, folder: Path, confirming: bool = False):
        source = (folder / "kernel.py").read_text()
        self.scored.append(re.search(r"^SPEED = ([0-9.]+)", source, re.M).group(1))
        plant = re.search(r'^PLANT = "(\w+)"', source, re.M)
        if plant and plant.group(1) == "link":
            os.link(self.outside, folder / "stolen.py")
        elif plant:
            os.mkfifo(folder / "pipe.cu")
        if confirming and "PLANT_ON_CONFIRM" in source and not (folder / "late.cu").exists():
            os.mkfifo(folder / "late.cu")
        return super()._score(folder, confirming)


def kernel(speed: float, extra: str = "") -> str:
    return SEED_SOURCE.replace("SPEED = 1.0", f"SPEED = {speed}") + extra


def write(content: str):
    return ("write_file", {"path": "kernel.py", "content": content})


def evaluate(why: str):
    return ("evaluate", {"rationale": why})


def evolve(tmp_path, evaluator, script) -> tuple[int, Run]:
    """`avo evolve --agent anthropic` on the fake task and `evaluator`, in a thread that must end within a bound."""
    out: dict = {}

    def drive():
        with Loopback(sequence(script)) as server, pytest.MonkeyPatch.context() as patch:
            patch.setenv("ANTHROPIC_BASE_URL", server.url)
            patch.setenv("ANTHROPIC_API_KEY", "sk-test-key-000000")
            session, run, lines = fake_session(tmp_path, evaluator=evaluator, flags={
                "agent.kind": "anthropic", "budget.max_candidates": 3})
            out["code"] = run_session(session, run, lines).code

    thread = threading.Thread(target=drive, daemon=True)
    thread.start()
    thread.join(120)
    assert not thread.is_alive(), "the run blocked (on a planted FIFO?)"
    assert "code" in out, "the run raised"
    return out["code"], Run.open("latest", tmp_path / "runs")


@pytest.fixture
def outside(tmp_path):
    path = tmp_path / "outside.py"
    path.write_text("SECRET = 1\n")
    return path


def _assert_rejected(run: Run, cid: str, planted: str, what: str) -> None:
    info, result = run.lineage.info(cid), run.load_eval(cid)
    assert info.status == "rejected" and result.rule == RULE
    assert f"{planted} is {what}" in result.message
    assert planted not in [path for path, _ in run.lineage.files(cid)]
    assert not os.path.lexists(run.workspace / planted)


@pytest.mark.parametrize("plant, planted, what", [("link", "stolen.py", "a hard link (2 names)"),
                                                  ("fifo", "pipe.cu", "a FIFO")])
def test_one_at_a_time_the_planting_candidate_is_rejected_and_the_run_goes_on(tmp_path, outside, plant, planted,
                                                                                  what):
    script = [anthropic_turn(write(kernel(3.0, f'PLANT = "{plant}"\n')), evaluate("plants")),
              anthropic_turn(write(kernel(1.5)), evaluate("honest")), anthropic_turn(text="done")]
    code, run = evolve(tmp_path, Planting(outside), script)
    assert code == 0
    _assert_rejected(run, "c0001", planted, what)
    assert run.lineage.info("c0002").status == "correct" and run.lineage.best == "c0002"
    assert outside.read_text() == "SECRET = 1\n" and os.stat(outside).st_nlink == 1


def test_what_a_confirmation_run_planted_rejects_the_next_candidate_unevaluated(tmp_path, outside):
    evaluator = Planting(outside)
    script = [anthropic_turn(write(kernel(1.5, "PLANT_ON_CONFIRM = 1\n")), evaluate("faster")),
              anthropic_turn(write(kernel(2.0)), evaluate("next")), anthropic_turn(text="done")]
    code, run = evolve(tmp_path, evaluator, script)
    assert code == 0 and run.lineage.best == "c0001"
    _assert_rejected(run, "c0002", "late.cu", "a FIFO")
    assert "2.0" not in evaluator.scored  # refused before it was evaluated


def test_batched_the_planting_candidate_is_rejected_and_its_sibling_filed(tmp_path, outside):
    pool = EvalPool([Planting(outside, "cpu 0"), Planting(outside, "cpu 1")])
    script = [anthropic_turn(write(kernel(3.0, 'PLANT = "fifo"\n')), evaluate("plants"), write(kernel(1.5)),
                             evaluate("honest")), anthropic_turn(text="done")]
    code, run = evolve(tmp_path, pool, script)
    assert code == 0
    result = run.load_eval("c0001")
    assert run.lineage.info("c0001").status == "rejected" and "pipe.cu is a FIFO" in result.message
    assert "pipe.cu" not in [path for path, _ in run.lineage.files("c0001")]
    assert run.lineage.info("c0002").status == "correct" and run.lineage.best == "c0002"


def test_a_seed_folder_with_a_link_is_one_clear_error(tmp_path, outside):
    from agent_fakes import write_seed
    from avo.errors import UserError

    seed = write_seed(tmp_path / "seed")
    (seed / "helper.py").symlink_to(outside)
    session, run, lines = fake_session(tmp_path, seed=seed)
    with pytest.raises(UserError, match=r"seed kernel folder .*seed: helper.py is a symlink"):
        run_session(session, run, lines)
