"""Profile and compiler facts as the heuristic agent reads them, from the profiler's own summaries."""

from __future__ import annotations

from pathlib import Path

import pytest

from avo.agent.heuristic.facts import facts_from

FIXTURE = Path(__file__).resolve().parents[1] / "profile" / "fixtures" / "ncu-h200-triton-gemm-details.csv"


def test_a_real_ncu_summary_gives_its_headline_numbers():
    from avo.profile.ncu_report import parse_details_csv
    from avo.profile.ncu_summary import summarize

    facts = facts_from(summarize(parse_details_csv(FIXTURE.read_text())))
    assert facts.dram_pct == pytest.approx(23.16)
    assert facts.compute_pct == pytest.approx(81.0)
    assert facts.registers == 154 and facts.spills == 0
    assert not facts.memory_bound


def test_stalls_in_metric_names_or_in_words_are_both_long_scoreboard():
    by_metric = {"stalls": [{"reason": "barrier", "pct": 20.0}, {"reason": "long_scoreboard", "pct": 41.0}]}
    in_words = {"stalls": [{"reason": "waiting for a scoreboard dependency on a L1TEX (local, global, surface, "
                                      "texture) operation", "pct": 33.5}]}
    assert facts_from(by_metric).long_scoreboard_pct == 41.0
    assert facts_from(in_words).long_scoreboard_pct == 33.5
    assert facts_from({"stalls": [{"reason": "math pipe throttle", "pct": 50}]}).long_scoreboard_pct is None


def test_memory_bound_needs_dram_above_compute():
    facts = facts_from({"dram_throughput_pct": 82.0, "sm_throughput_pct": 40.0, "tensor_pipe_pct": 25.0})
    assert facts.memory_bound and facts.tensor_pipe_pct == 25.0


def test_compile_facts_override_registers_and_spills():
    data = {"kernels": [{"name": "k", "registers": 255, "spills": {"store_bytes": 96, "load_bytes": 128}}],
            "registers": 255, "spills": {"store_bytes": 96, "load_bytes": 128}}
    facts = facts_from({"registers_per_thread": 168}, data)
    assert facts.registers == 255 and facts.spills == 128
