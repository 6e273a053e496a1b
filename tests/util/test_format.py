"""An error in one line: the exception's type and the line of its message that says what failed."""

from __future__ import annotations

from avo.util.format import first_line, headline


def test_an_empty_message_is_the_type_alone():
    assert first_line(RuntimeError()) == "RuntimeError"
    assert first_line(RuntimeError("   \n  ")) == "RuntimeError"
    assert headline("") == ""


def test_a_one_line_message_follows_its_type():
    assert first_line(ValueError("inner dimensions differ")) == "ValueError: inner dimensions differ"


def test_a_message_that_opens_with_a_heading_gives_its_last_line():
    traceback_like = ("Traceback (most recent call last):\n  File \"kernel.py\", line 3, in gemm\n"
                      "    return a @ c\nNameError: name 'c' is not defined\n")
    assert first_line(RuntimeError(traceback_like)) == "RuntimeError: NameError: name 'c' is not defined"
    triton_compile = "at 12:4:\n    acc = tl.dot(a, b)\n    ^\nAssertionError('Both inputs must be 2D')"
    assert headline(triton_compile) == "AssertionError('Both inputs must be 2D')"
    assert headline("case 1x1x1_fp16 raised:\n  kernel.py:73 in gemm\nRuntimeError") == "RuntimeError"


def test_a_message_that_opens_with_what_failed_keeps_its_first_line():
    assert headline("shape mismatch\n  a: (1, 2)\n  b: (3, 4)") == "shape mismatch"


def test_a_caret_is_no_headline():
    assert headline("at 3:4:\n    x = y\n    ^") == "x = y"
