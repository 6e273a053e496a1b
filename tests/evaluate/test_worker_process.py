"""Workers started ahead of their request (`Evaluator(prewarm=True)`), and what one worker passes on to the next
(the reference's ops): faster, never shared, and no check weaker for it. Under the Triton interpreter."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from avo.config import EvalConfig
from avo.evaluate.harness import Evaluator
from avo.gpus import PROFILES

KERNELS = Path(__file__).parent / "kernels"
CHEATS = Path(__file__).parent / "cheats"
H200 = PROFILES["h200"]


def evaluator(**kwargs) -> Evaluator:
    config = EvalConfig(check_suite="tiny", bench_suite="", seed=11)
    return Evaluator("gemm", device="interpret", gpu=H200, config=config, **kwargs)


def wait_until_set_up(ev: Evaluator, timeout_s: float = 60.0) -> None:
    assert ev._spares and ev._spares[0].ready(timeout_s), "the prepared worker never finished its set-up"


def test_a_prepared_worker_scores_the_next_candidate_without_the_set_up(tmp_path):
    ev = evaluator(prewarm=True, worker="cpu 0", node="here")
    try:
        first = ev.evaluate(KERNELS / "good_gemm")
        assert first.status == "correct", first.message
        assert (first.worker, first.node) == ("cpu 0", "here")
        assert ev.known.get("forbidden") and "mm" in ev.known["forbidden"], ev.known
        assert ev.setup()["forbidden"] == ev.known["forbidden"], "later workers are told the ops recorded"
        spare = ev._spares[0]
        assert spare.alive()
        wait_until_set_up(ev)
        second = ev.evaluate(KERNELS / "good_gemm")
        assert second.status == "correct", second.message
        assert not spare.alive() and not spare.path.exists(), "a worker is used once and its folder removed"
        assert ev._spares and ev._spares[0] is not spare, "the next one is a new process"
    finally:
        ev.close()
    # Its set-up ended before the candidate was handed to it: the request waited for none of it.
    assert second.stage_s["waited"] == 0.0, second.stage_s


def test_the_worker_prepared_during_the_first_evaluation_is_told_the_ops_it_recorded(monkeypatch):
    """The second worker starts (gated) before the first has reported the reference's ops; it is told them when it
    is let go, so it does not record them over every check case again."""
    from avo.evaluate.worker_process import WorkerProcess

    sent: list[tuple[int, object]] = []
    original = WorkerProcess._send
    monkeypatch.setattr(WorkerProcess, "_send", lambda self, payload: sent.append((id(self), payload))
                        or original(self, payload))
    ev = evaluator(prewarm=True)
    try:
        assert ev.evaluate(KERNELS / "good_gemm").status == "correct"
        spare = id(ev._spares[0])
        told = [payload for who, payload in sent if who == spare]
        assert told[0]["forbidden"] is None, "created before the first worker reported"
        assert told[1] == {"forbidden": ev.known["forbidden"]} and "mm" in told[1]["forbidden"], told
        wait_until_set_up(ev)
        assert ev.evaluate(KERNELS / "good_gemm").status == "correct"
    finally:
        ev.close()


def test_once_the_ops_are_known_two_workers_are_kept_ahead_and_the_timing_waits_for_the_second(monkeypatch):
    """From the second evaluation on, two workers are kept ahead: the one after the next imports during one
    evaluation and is let go when it ends, so it sets up through the caller's turn and the next evaluation's compile
    and check. That evaluation's check verdicts, which its timing waits for, are held until it is set up: the two
    never share the GPU while anything is timed, and the next request finds its worker ready (on the H200 the set-up
    was the 3.9 s each attention candidate waited)."""
    from avo.evaluate.worker_process import WorkerProcess

    sent: list[tuple[int, object, bool]] = []
    original = WorkerProcess._send
    ev = evaluator(prewarm=True)
    watched: list[WorkerProcess] = []

    def send(self, payload):
        sent.append((id(self), payload, bool(watched) and bool(watched[0]._report)))
        return original(self, payload)

    monkeypatch.setattr(WorkerProcess, "_send", send)
    assert not ev.overlap, "under the interpreter the CPU is timed: one worker ahead, set up after"
    ev.overlap = True
    try:
        assert ev.evaluate(KERNELS / "good_gemm").status == "correct"
        assert len(ev._spares) == 1, "the reference's ops were not known when it started: one ahead"
        wait_until_set_up(ev)
        assert ev.evaluate(KERNELS / "good_gemm").status == "correct"
        assert len(ev._spares) == 2 and all(spare.released for spare in ev._spares), "both let go as it ended"
        third_worker, watched[:] = ev._spares[0], [ev._spares[1]]
        wait_until_set_up(ev)
        sent[:] = []
        third = ev.evaluate(KERNELS / "good_gemm")
        fourth_worker = watched[0]
        assert fourth_worker.alive() and fourth_worker.ready(), "the one after it was set up by then"
        after = ev._spares[1]
        fourth = ev.evaluate(KERNELS / "good_gemm")
    finally:
        ev.close()
    assert (third.status, fourth.status) == ("correct", "correct"), (third.message, fourth.message)
    mine = [(payload, ready) for who, payload, ready in sent if who == id(third_worker)]
    verdicts = [ready for payload, ready in mine if isinstance(payload, str) and '"verdict"' in payload]
    assert verdicts and all(verdicts), "a check verdict went out while the next worker was still setting up"
    let_go = [i for i, (who, payload, _) in enumerate(sent) if who == id(after) and payload == ev.known]
    last_of_third = max(i for i, (who, _, _) in enumerate(sent) if who == id(third_worker))
    assert let_go and let_go[0] > last_of_third, "the one after the next is let go only once the evaluation ended"
    assert fourth.stage_s["waited"] == 0.0, fourth.stage_s


def test_the_time_a_verdict_waits_on_the_spare_is_not_counted_against_the_candidates_limit(monkeypatch):
    """Each poll that holds the verdict back moves the watch's clock 100 s (a spare slow to set up): past the check
    limit three times over, yet the candidate is scored, since the wait was the spare's."""
    import time
    import types

    from avo.evaluate import harness

    skew = [0.0]
    clock = types.SimpleNamespace(**{k: getattr(time, k) for k in dir(time) if not k.startswith("_")})
    clock.monotonic = lambda: time.monotonic() + skew[0]

    def slow_spare(spare, limit_s):
        def hold():
            if skew[0] < 300.0:
                skew[0] += 100.0
                return True
            return False
        return hold

    monkeypatch.setattr(harness, "_setting_up", slow_spare)
    monkeypatch.setattr(harness, "time", clock)
    ev = Evaluator("gemm", device="interpret", gpu=H200, prewarm=True, overlap=True,
                   config=EvalConfig(check_suite="tiny", bench_suite="", seed=11, check_timeout_s=100.0))
    try:
        for _ in range(2):  # the first two keep their workers ahead; the third's timing waits for the next
            assert ev.evaluate(KERNELS / "good_gemm").status == "correct"
        assert skew[0] == 0.0
        result = ev.evaluate(KERNELS / "good_gemm")
    finally:
        ev.close()
    assert result.status == "correct", result.message
    assert skew[0] == 300.0, "the verdict was never held"


def test_a_prepared_worker_that_died_while_waiting_is_replaced():
    ev = evaluator(prewarm=True)
    try:
        ev.warm()
        os.kill(ev._spares[0].proc.pid, 9)
        ev._spares[0].proc.wait()
        result = ev.evaluate(KERNELS / "good_gemm")
        assert result.status == "correct", result.message
    finally:
        ev.close()


class _Spare:
    """A prepared worker as `_take_worker` sees it: let go, then set up (`ready`) or dead after some polls."""

    released = True

    def __init__(self, sets_up: bool):
        self.sets_up, self.polls, self.discarded = sets_up, 0, False

    def alive(self) -> bool:
        return self.sets_up or self.polls < 3

    def ready(self, timeout_s: float = 0.0) -> bool:
        self.polls += 1
        return self.sets_up and self.polls >= 2

    def discard(self) -> None:
        self.discarded = True


def test_a_prepared_worker_is_handed_a_candidate_only_once_set_up_and_one_that_died_setting_up_is_replaced():
    """Set up beside the evaluation before it, a worker may die of what that one did to the GPU (its memory used up):
    the next candidate then gets a fresh worker, not a crash of its own."""
    ev = evaluator(prewarm=True)
    ev._new_worker = lambda gated=False: "fresh"
    ev._spares = [ready := _Spare(sets_up=True)]
    assert ev._take_worker() is ready and ready.polls == 2 and not ready.discarded
    ev._spares = [dying := _Spare(sets_up=False)]
    assert ev._take_worker() == "fresh" and dying.discarded


def test_the_set_up_a_request_waited_for_before_its_hand_over_is_reported_as_waited():
    ev = evaluator(prewarm=True)
    try:
        ev.warm()  # asked for at once: the worker is still importing torch when the candidate comes
        result = ev.evaluate(KERNELS / "good_gemm")
    finally:
        ev.close()
    assert result.status == "correct", result.message
    assert result.stage_s["waited"] > 0.0, result.stage_s


def test_close_ends_the_prepared_worker_and_removes_its_folder():
    ev = evaluator(prewarm=True)
    ev.warm()
    spare = ev._spares[0]
    ev.close()
    assert not spare.alive() and not spare.path.exists()


def test_the_ops_passed_on_still_reject_a_library_call_reached_at_run_time(tmp_path):
    """The second evaluation uses the reference's ops the first recorded; a library call through a name built at
    run time (which the static guard cannot resolve) is still caught by the op recorder."""
    ev = evaluator()
    assert ev.evaluate(KERNELS / "good_gemm").status == "correct"
    assert "mm" in ev.known["forbidden"]
    folder = tmp_path / "cheat"
    shutil.copytree(CHEATS / "library_dynamic_name", folder)
    result = ev.evaluate(folder)
    assert (result.status, result.rule) == ("rejected", "runtime.library_op"), result.message


def test_ops_passed_on_that_miss_what_the_reference_does_are_recorded_again(tmp_path):
    """Were the passed-on set wrong (another library build, or tampered with), the first check case's ops would not
    be in it, and the worker records the reference over every case itself."""
    ev = evaluator(known={"forbidden": []})
    folder = tmp_path / "cheat"
    shutil.copytree(CHEATS / "library_dynamic_name", folder)
    result = ev.evaluate(folder)
    assert (result.status, result.rule) == ("rejected", "runtime.library_op"), result.message


def test_avo_imports_what_judging_needs_while_the_worker_starts(tmp_path):
    """The first verdict is computed in avo's process with torch: imported when a worker is started, beside the
    worker's own imports, not while the worker waits for that verdict (about a second on a CPU machine)."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import sys
        from avo.config import EvalConfig
        from avo.evaluate.harness import Evaluator
        from avo.gpus import PROFILES

        ev = Evaluator("gemm", device="interpret", gpu=PROFILES["h200"], prewarm=True,
                       config=EvalConfig(check_suite="tiny", bench_suite="", sandbox="off"))
        before = "torch" in sys.modules
        ev.warm()
        after = "torch" in sys.modules
        ev.close()
        print(before, after)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "True"]
