"""Run configuration (avo/config.py): settings whose form changed still load."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from avo.config import EvalConfig


@pytest.mark.parametrize("value, way", [("processes", "processes"), ("threads", "threads"), ("off", "off"),
                                        (True, "processes"), (False, "off"), ("true", "processes"),
                                        ("false", "off"), (1, "processes"), (0, "off"), ("no", "off")])
def test_compile_ahead_reads_its_ways_and_the_earlier_boolean(value, way):
    assert EvalConfig(compile_ahead=value).compile_ahead == way


def test_compile_ahead_refuses_anything_else():
    with pytest.raises(ValidationError, match="processes"):
        EvalConfig(compile_ahead="fork")
