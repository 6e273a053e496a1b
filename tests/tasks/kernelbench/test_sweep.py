"""fast_p and the problem order of a folder sweep (avo/tasks/kernelbench/sweep.py), on rows made by hand; the sweep
itself runs on real KernelBench problems in tests/evaluate/test_kernelbench_users.py and
tests/agent/test_evolve_folder.py."""

from __future__ import annotations

from avo.evaluate.result import EvalResult
from avo.tasks.kernelbench import sweep


def test_fast_p_counts_correct_rows_faster_than_p_over_all_rows():
    rows = [sweep.Row("a", "correct", True, 0.5), sweep.Row("b", "correct", True, 1.2, 0.9),
            sweep.Row("c", "correct", True, 1.6, 1.7), sweep.Row("d", "correct", True, 2.5, 2.1),
            sweep.Row("e", "incorrect", False, 3.0), sweep.Row("f", "missing")]
    assert sweep.fast_p_table(rows) == {"0": round(4 / 6, 4), "1": round(3 / 6, 4), "1.5": round(2 / 6, 4),
                                        "2": round(1 / 6, 4)}
    assert sweep.fast_p_table(rows, "fitness_compile") == {"0": round(4 / 6, 4), "1": round(2 / 6, 4),
                                                           "1.5": round(2 / 6, 4), "2": round(1 / 6, 4)}
    assert sweep.fast_p([], 1.0) == 0.0


def test_an_untimed_correct_row_counts_for_fast_0_only():
    rows = [sweep.Row("a", "correct", True, None)]
    assert sweep.fast_p_table(rows) == {"0": 1.0, "1": 0.0, "1.5": 0.0, "2": 0.0}


def test_problems_come_in_kernelbench_order(tmp_path):
    for name in ("10_b.py", "2_a.py", "1_c.py", "_helper.py", "notes.md"):
        (tmp_path / name).write_text("")
    assert [p.name for p in sweep.problems(tmp_path)] == ["1_c.py", "2_a.py", "10_b.py"]


def test_a_rows_reason_is_one_line_and_its_message_whole():
    crash = EvalResult(status="crash", message="the evaluation process exited with code 1 without a result during "
                       "stage start\n--- stderr (tail) ---\nTraceback (most recent call last):\n  ...\n"
                       "RuntimeError: Expected a 'cuda' device type for generator but found 'cpu'\n\n")
    row = sweep.row_of("40_LayerNorm", crash, timed=True)
    assert row.reason == ("the evaluation process exited with code 1 without a result during stage start: "
                          "RuntimeError: Expected a 'cuda' device type for generator but found 'cpu'")
    assert row.message == crash.message and not row.correct and row.fitness is None
    wrong = EvalResult(status="incorrect", message="case a: relative error 0.02 exceeds the tolerance 0.001\nmore")
    assert sweep.row_of("9", wrong, timed=True).reason == "case a: relative error 0.02 exceeds the tolerance 0.001"
    assert sweep.reason_of(EvalResult(status="correct")) == ""
