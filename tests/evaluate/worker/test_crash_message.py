"""A candidate that raises: the message's first line names the exception's type and what it said, since the run's
log, the lineage and `avo evolve`'s stop line show only that line; the candidate's frames and the whole exception
follow."""

from __future__ import annotations

from pathlib import Path

from avo.evaluate.result import EvalResult
from avo.evaluate.worker.candidate import Candidate, classify
from avo.evaluate.worker.loader import load_entry

RAISING = {
    "empty": "def gemm(a, b):\n    raise RuntimeError()\n",
    "multi_line": ("def gemm(a, b):\n    raise ValueError('while multiplying:\\n  a is (1, 1)\\n'\n"
                   "                     'inner dimensions differ')\n"),
}


def crash_message(tmp_path: Path, kind: str) -> str:
    folder = tmp_path / kind
    folder.mkdir()
    (folder / "kernel.py").write_text(RAISING[kind])
    candidate = Candidate(0, folder, EvalResult(status="crash"))
    try:
        load_entry(folder, "gemm")(None, None)
    except Exception as exc:
        verdict = classify(exc, candidate, "case 1x1x1_fp16")
    candidate.finish(verdict)
    assert candidate.result.status == "crash"
    return candidate.result.message


def test_an_exception_without_a_message_is_named_on_the_first_line(tmp_path):
    message = crash_message(tmp_path, "empty")
    first, *rest = message.splitlines()
    assert first == "case 1x1x1_fp16 raised: RuntimeError"
    assert rest == ["  kernel.py:2 in gemm", "    raise RuntimeError()", "RuntimeError"]
    assert EvalResult(status="crash", message=message).summary() == "crash: case 1x1x1_fp16 raised: RuntimeError"


def test_a_multi_line_message_gives_its_informative_line_and_keeps_the_rest(tmp_path):
    message = crash_message(tmp_path, "multi_line")
    assert message.splitlines()[0] == "case 1x1x1_fp16 raised: ValueError: inner dimensions differ"
    assert "ValueError: while multiplying:\n  a is (1, 1)\ninner dimensions differ" in message
