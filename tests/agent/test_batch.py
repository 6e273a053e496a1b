"""Several `evaluate` calls in one model response, on a pool of two workers: scored at once, filed in call order.

The real session, loop, tools, lineage and pool (evaluate/pool.py); only the slots are fakes that score instantly after
a delay the kernel asks for (`DELAY = 0.8`), or once another candidate has been scored (`AFTER = 2.0`, its SPEED), so
the order in which they finish can be chosen."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest

from agent_fakes import SEED_SOURCE, FakeEvaluator, fake_session
from agent_fakes import evolve as run_session
from agent_loopback import Loopback, anthropic_turn, sequence
from avo.evaluate.pool import EvalPool
from avo.run.directory import Run


class FakeSlot(FakeEvaluator):
    """A worker of the pool: sleeps as long as its kernel's DELAY says, or waits (a minute at most) for the candidate
    its AFTER names to be scored on another slot, then scores like FakeEvaluator."""

    def __init__(self, label: str, log: list, scored: threading.Condition):
        super().__init__()
        self.worker, self.log, self.scored = label, log, scored

    def warm(self) -> None:
        pass

    def close(self) -> None:
        pass

    def _score(self, folder: Path, confirming: bool = False):
        source = (folder / "kernel.py").read_text()
        after = re.search(r"^AFTER = ([0-9.]+)", source, re.M)
        if after:
            with self.scored:
                self.scored.wait_for(lambda: any(entry[3] == after.group(1) for entry in self.log), timeout=60)
        else:
            found = re.search(r"^DELAY = ([0-9.]+)", source, re.M)
            time.sleep(float(found.group(1)) if found else 0.05)
        speed = re.search(r"^SPEED = ([0-9.]+)", source, re.M).group(1)
        with self.scored:
            self.log.append((time.monotonic(), self.worker, "confirm" if confirming else "evaluate", speed))
            self.scored.notify_all()
        result = super()._score(folder, confirming)
        result.worker = self.worker
        return result


@pytest.fixture
def pool(tmp_path, monkeypatch):
    log: list = []
    scored = threading.Condition()
    made = EvalPool([FakeSlot("cpu 0", log, scored), FakeSlot("cpu 1", log, scored)])
    made.log = log
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-key-000000")
    return made


def kernel(speed: float, delay: float = 0.05, after: float | None = None) -> str:
    wait = f"AFTER = {after}\n" if after is not None else f"DELAY = {delay}\n"
    return SEED_SOURCE.replace("SPEED = 1.0", f"SPEED = {speed}") + wait


def evolve(tmp_path, pool, script, max_candidates: int) -> tuple[int, Run, Loopback]:
    """`avo evolve --agent anthropic` on the fake task, its evaluations on `pool`, the model a loopback server."""
    with Loopback(sequence(script)) as server, pytest.MonkeyPatch.context() as patch:
        patch.setenv("ANTHROPIC_BASE_URL", server.url)
        session, run, lines = fake_session(tmp_path, evaluator=pool, flags={
            "agent.kind": "anthropic", "budget.max_candidates": max_candidates})
        outcome = run_session(session, run, lines)
    return outcome.code, Run.open("latest", tmp_path / "runs"), server


def write(content: str):
    return ("write_file", {"path": "kernel.py", "content": content})


def evaluate(why: str):
    return ("evaluate", {"rationale": why})


def results_of(server, request: int) -> list[dict]:
    return [b for m in server.requests[request]["body"]["messages"] if m["role"] == "user"
            and isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_result"]


def text_of(block: dict) -> str:
    content = block["content"]
    return content if isinstance(content, str) else " ".join(part.get("text", "") for part in content)


def test_two_evaluations_run_at_once_and_are_filed_in_call_order(tmp_path, pool):
    """The first finishes only once the second has been scored (had they not run at once, it would wait out its
    minute first): it is still committed first, with the second as its child."""
    script = [anthropic_turn(write(kernel(1.5, after=2.0)), evaluate("slow one"), write(kernel(2.0)),
                             evaluate("quick one")), anthropic_turn(text="done")]
    code, run, _ = evolve(tmp_path, pool, script, 2)
    assert code == 0
    lineage = run.lineage
    first, second = lineage.info("c0001"), lineage.info("c0002")
    assert (first.rationale, second.rationale) == ("slow one", "quick one")
    assert (first.parent, second.parent) == ("c0000", "c0001")
    finished = [(speed, worker) for _, worker, kind, speed in pool.log if kind == "evaluate"][1:]  # after the seed
    # called second, finished first: it started before the slow one was done
    assert [speed for speed, _ in finished] == ["2.0", "1.5"], finished
    assert {worker for _, worker in finished} == {"cpu 0", "cpu 1"}, "each worker scored one"
    assert lineage.best == "c0002" and run.load_eval("c0002").worker in ("cpu 0", "cpu 1")


def test_a_checkout_between_them_makes_them_siblings(tmp_path, pool):
    script = [anthropic_turn(write(kernel(1.5)), evaluate("a"), ("checkout", {"cid": "c0000"}),
                             write(kernel(0.5)), evaluate("b")), anthropic_turn(text="done")]
    code, run, _ = evolve(tmp_path, pool, script, 2)
    assert code == 0
    assert (run.lineage.info("c0001").parent, run.lineage.info("c0002").parent) == ("c0000", "c0000")


def test_the_same_source_twice_in_one_response_is_scored_once(tmp_path, pool):
    script = [anthropic_turn(write(kernel(1.5)), evaluate("a"), ("list_files", {}), evaluate("a again")),
              anthropic_turn(text="done")]
    code, run, server = evolve(tmp_path, pool, script, 5)
    assert len(run.lineage) == 2  # the baseline and one candidate
    assert "byte-identical to c0001" in text_of(results_of(server, 1)[-1])


def test_a_tool_that_reads_the_lineage_waits_for_the_evaluations_before_it(tmp_path, pool):
    script = [anthropic_turn(write(kernel(1.5, delay=0.5)), evaluate("a"), ("lineage", {"limit": 5}),
                             write(kernel(2.0)), evaluate("b")), anthropic_turn(text="done")]
    code, run, server = evolve(tmp_path, pool, script, 5)
    listing = text_of(results_of(server, 1)[2])
    assert "c0001" in listing and "c0002" not in listing, listing


def test_the_candidate_budget_counts_the_evaluations_in_flight(tmp_path, pool):
    script = [anthropic_turn(write(kernel(1.5)), evaluate("a"), write(kernel(2.0)), evaluate("b"),
                             write(kernel(2.5)), evaluate("c")), anthropic_turn(text="done")]
    code, run, _ = evolve(tmp_path, pool, script, 2)
    assert code == 0 and len(run.lineage) == 3
    assert "candidate budget of 2 spent" in run.events()[-1]["reason"]


def test_a_checkout_after_the_last_evaluation_is_what_a_resume_finds(tmp_path, pool):
    """The results are filed after the checkout ran; the last one still records the checked-out candidate as the
    workspace's parent, which is what a resume reads."""
    script = [anthropic_turn(write(kernel(1.5)), evaluate("a"), write(kernel(2.0)), evaluate("b"),
                             ("checkout", {"cid": "c0000"})), anthropic_turn(text="done")]
    code, run, _ = evolve(tmp_path, pool, script, 5)
    assert code == 0 and len(run.lineage) == 3
    parents = [e["workspace_parent"] for e in run.events() if e.get("workspace_parent")]
    assert parents[-1] == "c0000", parents


def test_no_tool_runs_once_the_evaluations_in_flight_fill_the_budget(tmp_path, pool):
    """One call at a time, the budget check before the third write would end the run: so it does here."""
    script = [anthropic_turn(write(kernel(1.5)), evaluate("a"), write(kernel(2.0)), evaluate("b"),
                             write(kernel(2.5))), anthropic_turn(text="done")]
    code, run, _ = evolve(tmp_path, pool, script, 2)
    assert code == 0 and len(run.lineage) == 3
    assert "SPEED = 2.5" not in (run.path / "workspace" / "kernel.py").read_text()


def test_an_evaluation_that_fails_to_file_leaves_the_workspace_on_the_checkout_before_it(tmp_path, pool,
                                                                                       monkeypatch):
    """a, a checkout of the baseline, then b, whose filing fails: one call at a time the workspace would still come
    from the baseline, so the next candidate (evaluated alone, a turn later) is the baseline's child, not a's."""
    import avo.agent.batch as batch

    filed = batch.file_result

    def failing_for_b(ctx, folder, parent, rationale, result):
        if rationale == "b":
            raise OSError("the lineage could not be written")
        return filed(ctx, folder, parent, rationale, result)

    monkeypatch.setattr(batch, "file_result", failing_for_b)
    script = [anthropic_turn(write(kernel(1.5)), evaluate("a"), ("checkout", {"cid": "c0000"}),
                             write(kernel(0.5)), evaluate("b")),
              anthropic_turn(write(kernel(2.0)), evaluate("c")), anthropic_turn(text="done")]
    code, run, server = evolve(tmp_path, pool, script, 5)
    assert code == 0
    assert "failed" in text_of(results_of(server, 1)[-1])
    assert (run.lineage.info("c0001").rationale, run.lineage.info("c0002").rationale) == ("a", "c")
    assert run.lineage.info("c0002").parent == "c0000"
    a_result, b_result = [e for e in run.events() if e.get("kind") == "tool_result" and e.get("name") == "evaluate"][:2]
    assert (a_result["workspace_parent"], b_result["workspace_parent"]) == ("c0001", "c0000")  # what a resume reads
