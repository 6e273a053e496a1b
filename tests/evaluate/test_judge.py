"""The check suite's judge, driven over its real pipes as a producer and a worker would: references in, outputs in,
verdicts out, and its last word over what the worker reports (avo/evaluate/judge.py, frames.py)."""

from __future__ import annotations

import io
import json
import os
import threading

import pytest
import torch

from avo.evaluate import frames
from avo.evaluate.judge import Judge
from avo.evaluate.result import CaseResult, EvalResult
from avo.evaluate.worker.correctness import poison

SHAPE = [3, 5]


def _stream(*chunks: bytes) -> io.BytesIO:
    return io.BytesIO(b"".join(chunks))


def _frame_bytes(header: dict, payload: bytes = b"") -> bytes:
    read, write = os.pipe()
    threading.Thread(target=lambda: (frames.write(write, header, payload), os.close(write))).start()
    with os.fdopen(read, "rb") as stream:
        return stream.read()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64])
def test_a_tensor_goes_through_a_frame_bit_for_bit(dtype):
    t = torch.randn(4, 7).to(dtype)
    header, payload = frames.read(_stream(_frame_bytes({"x": 1}, frames.tensor_bytes(t))), 1 << 20)
    assert header["x"] == 1
    back = frames.tensor_from(payload, str(dtype).removeprefix("torch."), [4, 7])
    assert torch.equal(back.view(torch.uint8), t.view(torch.uint8))


@pytest.mark.parametrize("raw, why", [
    (b"[1, 2]\n", "not a frame"),
    (b"not json\n", "not a frame"),
    (b'{"nbytes": 100}\n' + b"x" * 10, "cut short"),
    (b'{"nbytes": 5000}\n' + b"x" * 5000, "at most"),
    (b'{"nbytes": -1}\n', "at most"),
    (b"x" * (frames.MAX_HEADER + 10), "longer than allowed"),
])
def test_anything_but_a_frame_is_malformed(raw, why):
    with pytest.raises(frames.Malformed, match=why):
        frames.read(_stream(raw), 1000)


def _ref_header(index: int, ref: torch.Tensor, **extra) -> dict:
    return dict({"index": index, "case": f"c{index}", "label": f"c{index}", "tolerance": 1e-2,
                 "out_shape": SHAPE, "out_dtype": "float16", "shape": list(ref.shape), "dtype": "float32"}, **extra)


def _judge_with(refs: list[torch.Tensor]) -> Judge:
    judge = Judge()
    refs_fd, _ = judge.child_fds
    for i, ref in enumerate(refs):
        frames.write(refs_fd, _ref_header(i, ref), frames.tensor_bytes(ref))
    frames.write(refs_fd, {"end": True, "cases": len(refs)})
    return judge


def _send(judge: Judge, cand: int, outputs: dict[int, torch.Tensor]) -> None:
    _, checks_fd = judge.child_fds
    for index, out in outputs.items():
        frames.write(checks_fd, {"cand": cand, "case_index": index, "shape": list(out.shape), "dtype": "float16"},
                     frames.tensor_bytes(out))
    frames.write(checks_fd, {"cand": cand, "done": True})


def _answers(judge: Judge, count: int) -> list[dict]:
    """The verdict lines once `count` candidates are in (the readers are threads: waited for, with a bound)."""
    import time

    lines, deadline = [], time.monotonic() + 30
    while len(lines) < count and time.monotonic() < deadline:
        lines += [json.loads(line) for line in judge.answers()]
        time.sleep(0.01)
    return lines


def _worker_says_correct(cases: int) -> EvalResult:
    rows = [CaseResult(case=f"c{i}", suite="tiny", dtype="float16", correct=True, rel_err=0.0) for i in range(cases)]
    return EvalResult(status="correct", fitness=1.0, cases=rows)


def test_outputs_are_judged_against_references_the_worker_never_held():
    refs = [torch.randn(*SHAPE), torch.randn(*SHAPE)]
    judge = _judge_with(refs)
    wrong = torch.zeros(*SHAPE, dtype=torch.float16)
    unwritten = refs[1].half()
    poison(unwritten[0])
    _send(judge, 0, {0: refs[0].half(), 1: refs[1].half()})
    _send(judge, 1, {0: wrong, 1: unwritten})
    by_cand = {line["verdict"]: line["cases"] for line in _answers(judge, 2)}
    assert [v["correct"] for v in by_cand[0]] == [True, True] and by_cand[0][0]["rel_err"] < 1e-3
    assert [(v["correct"], v["rule"]) for v in by_cand[1]] == [(False, "check.mismatch"), (False, "check.unwritten")]
    assert by_cand[1][0]["rel_err"] == pytest.approx(1.0)
    results = [_worker_says_correct(2), _worker_says_correct(2)]  # what a lying worker reports
    judge.apply(results, "tiny")
    assert results[0].status == "correct" and results[0].cases[0].rel_err < 1e-3
    assert (results[1].status, results[1].rule, results[1].fitness) == ("incorrect", "check.mismatch", 0.0)
    assert results[1].cases[1].correct is False and "never" in results[1].cases[1].message


def test_a_candidate_reported_correct_without_all_its_outputs_judged_is_rejected():
    judge = _judge_with([torch.randn(*SHAPE), torch.randn(*SHAPE)])
    _send(judge, 0, {0: torch.zeros(*SHAPE, dtype=torch.float16)})  # case 1 never sent
    _answers(judge, 1)
    results = [_worker_says_correct(2), _worker_says_correct(2)]  # the second never sent anything
    judge.apply(results, "tiny")
    assert [(r.status, r.rule) for r in results] == [("rejected", "runtime.check_channel")] * 2
    assert "1 of its 2" in results[0].message and "0 of its 2" in results[1].message


def test_a_frame_the_worker_did_not_write_rejects_every_result():
    judge = _judge_with([torch.randn(*SHAPE)])
    _, checks_fd = judge.child_fds
    os.write(checks_fd, b'{"results": [{"status": "correct", "fitness": 99.0}]}\n')  # cheat forged_verdict's write
    os.close(checks_fd)
    import time

    deadline = time.monotonic() + 30
    while judge.forged is None and time.monotonic() < deadline:
        time.sleep(0.01)
    results = [_worker_says_correct(1)]
    judge.apply(results, "tiny")
    assert (results[0].status, results[0].rule) == ("rejected", "runtime.file_access")


def test_references_cut_short_are_the_evaluations_crash_not_a_pass():
    judge = Judge()
    refs_fd, _ = judge.child_fds
    ref = torch.randn(*SHAPE)
    frames.write(refs_fd, _ref_header(0, ref), frames.tensor_bytes(ref))
    os.close(refs_fd)  # the producer died before its end frame
    _send(judge, 0, {0: ref.half()})
    (line,) = _answers(judge, 1)
    assert "cut short" in line["error"]
    results = [_worker_says_correct(1)]
    judge.apply(results, "tiny")
    assert results[0].status == "rejected"
