"""The GPU block tests' timing arithmetic, on the CPU: the library's forward over each variant's, round by round, so
that a printed ratio comes with how far it moved between rounds."""

from __future__ import annotations

import pytest
from test_gpu import paired_ratios


def test_paired_ratios_pair_each_round_with_the_librarys_own():
    rounds = {"library": [1.0, 2.0, 1.0, 1.1, 1.0], "patched": [0.5, 2.0, 1.25, 1.0, 1.0]}
    low, median, high = paired_ratios(rounds)["patched"]
    # 2.0, 1.0, 0.8, 1.1, 1.0 round by round: the slow second round falls on both and cancels
    assert (low, median, high) == (pytest.approx(0.8), pytest.approx(1.0), pytest.approx(2.0))
    assert "library" not in paired_ratios(rounds)


def test_paired_ratios_take_another_base_and_every_other_variant():
    rounds = {"a": [2.0, 4.0], "b": [1.0, 4.0], "c": [4.0, 2.0]}
    assert paired_ratios(rounds, base="a") == {"b": (1.0, 1.5, 2.0), "c": (0.5, 1.25, 2.0)}
