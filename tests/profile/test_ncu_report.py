"""The ncu details-page parser and summary, on real ncu output captured on the H200 and on synthetic rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from avo.gpus import PROFILES
from avo.profile.ncu_report import parse_details_csv, roofline, to_number
from avo.profile.ncu_summary import MAX_LINES, render, summarize

FIXTURE = Path(__file__).parent / "fixtures" / "ncu-h200-triton-gemm-details.csv"
H200 = PROFILES["h200"]
GEMM_4096_FLOPS = 2.0 * 4096**3
GEMM_4096_BYTES = 3.0 * 4096 * 4096 * 2

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type",'
          '"Rule Description","Estimated Speedup Type","Estimated Speedup"')


def row(kid: str, kernel: str, section: str, metric: str, unit: str, value: str) -> str:
    return (f'"{kid}","7","python3","127.0.0.1","{kernel}","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0",'
            f'"{section}","{metric}","{unit}","{value}",')


@pytest.fixture(scope="module")
def h200_kernels():
    return parse_details_csv(FIXTURE.read_text())


def test_the_h200_fixture_parses_into_one_kernel_with_its_real_values(h200_kernels):
    assert len(h200_kernels) == 1
    k = h200_kernels[0]
    assert k.name == "mm_desc" and k.grid == "(512, 1, 1)" and k.block == "(256, 1, 1)"
    assert k.duration_us == pytest.approx(193.312)
    assert k.value("GPU Speed Of Light Throughput", "Compute (SM) Throughput") == 81.0
    assert k.value("GPU Speed Of Light Throughput", "DRAM Frequency") == pytest.approx(3_198_697_787.34)
    assert k.value("Launch Statistics", "Registers Per Thread") == 154
    assert k.value("Memory Workload Analysis", "Local Memory Spilling Request Overhead") is None  # "no data"
    assert {r.name for r in k.rules} >= {"SOLBottleneck", "CPIStall", "LaunchConfiguration", "TheoreticalOccupancy"}


def test_summary_of_the_h200_fixture(h200_kernels):
    s = summarize(h200_kernels, gpu=H200, flops=GEMM_4096_FLOPS, nbytes=GEMM_4096_BYTES, case="4096x4096x4096",
                  task="gemm")
    assert s["kernel"] == "mm_desc"
    assert s["duration_us"] == pytest.approx(193.312)
    assert (s["sm_throughput_pct"], s["memory_throughput_pct"]) == (81.0, 53.24)
    assert (s["dram_throughput_pct"], s["l2_throughput_pct"]) == (23.16, 49.33)
    assert s["speed_of_light_pct"] == 81.0
    assert (s["achieved_occupancy_pct"], s["theoretical_occupancy_pct"]) == (12.53, 12.5)
    assert s["occupancy_limiters"] == ["registers", "shared memory"]
    assert s["registers_per_thread"] == 154
    assert s["dynamic_shared_bytes"] == 147_480 and s["shared_bytes_per_block"] == 147_480
    assert s["local_spill_requests"] == 0
    # the per-reason stall metrics were not collected in this capture: the CPIStall rule gives the top stall
    assert s["stall_source"] == "rules"
    assert s["stalls"] == [{"reason": "waiting for sibling warps at a CTA barrier", "pct": 48.3}]
    assert s["top_pipe"] == {"name": "Shared", "pct": 81.0, "dominated_by": "Tensor (FP)"}
    assert s["tensor_pipe_pct"] is None and s["bank_conflicts"] is None
    first = s["rules"][0]
    assert first["name"] == "LaunchConfiguration" and first["speedup_pct"] == 25.0
    assert "3 full waves and a partial wave of 117 thread blocks" in first["hint"]
    assert not any("could not be found" in r["hint"] for r in s["rules"])


def test_rendered_summary_is_short_and_carries_the_headline_numbers(h200_kernels):
    s = summarize(h200_kernels, gpu=H200, flops=GEMM_4096_FLOPS, nbytes=GEMM_4096_BYTES, case="4096x4096x4096")
    text = render(s)
    assert len(text.splitlines()) <= MAX_LINES
    for expected in ("mm_desc", "193.31 us", "SM 81%", "DRAM 23.16%", "154 registers", "12.53%",
                     "CTA barrier: 48.3%", "711.0 TFLOPS", "compute-bound", "LaunchConfiguration"):
        assert expected in text, expected


def test_roofline_math_on_the_fixture_duration():
    r = roofline(GEMM_4096_FLOPS, GEMM_4096_BYTES, 193.312, H200)
    # 2*4096^3 FLOP in 193.312 us = 710.97 TFLOPS; 100,663,296 B in that time = 520.7 GB/s
    assert r["achieved_tflops"] == pytest.approx(711.0, abs=0.05)
    assert r["pct_of_peak_compute"] == pytest.approx(100 * 710.97 / 989.0, abs=0.05)
    assert r["achieved_gbps"] == pytest.approx(520.7, abs=0.05)
    assert r["arithmetic_intensity"] == pytest.approx(1365.3, abs=0.05)
    assert r["ridge_point"] == pytest.approx(989e3 / 4800, abs=0.05)
    assert r["bound"] == "compute" and r["pct_of_roofline"] == r["pct_of_peak_compute"]


def test_roofline_of_a_memory_bound_kernel_is_measured_against_bandwidth():
    # 1 GFLOP over 1 GB in 0.5 ms: intensity 1 FLOP/B, so 4.8 TB/s allows 4.8 TFLOPS; 2 TFLOPS is 41.7% of that
    r = roofline(1e9, 1e9, 500.0, H200)
    assert r["bound"] == "memory"
    assert r["achieved_gbps"] == 2000.0 and r["pct_of_peak_bandwidth"] == pytest.approx(41.7)
    assert r["pct_of_roofline"] == pytest.approx(41.7)


def test_extra_metrics_give_stalls_tensor_pipe_and_bank_conflicts_and_the_longest_kernel_leads():
    extra, wss = "Command line profiler metrics", "Warp State Statistics"
    stalled = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio".format
    lines = [
        "==PROF== Connected to process 7", HEADER,
        row("0", "fill", "GPU Speed Of Light Throughput", "Duration", "us", "2.50"),
        row("1", "attn_fwd", "GPU Speed Of Light Throughput", "Duration", "ms", "1.25"),
        row("1", "attn_fwd", wss, "Warp Cycles Per Issued Instruction", "cycle", "20.00"),
        row("1", "attn_fwd", extra, stalled("long_scoreboard"), "", "9.00"),
        row("1", "attn_fwd", extra, stalled("barrier"), "", "3.00"),
        row("1", "attn_fwd", extra, stalled("selected"), "", "1.00"),
        row("1", "attn_fwd", extra, "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active", "%",
            "61.5"),
        row("1", "attn_fwd", extra, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "", "1,234,567"),
        row("1", "attn_fwd", extra, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "", "0"),
        "==PROF== Disconnected from process 7",
    ]
    kernels = parse_details_csv("\n".join(lines))
    assert [k.name for k in kernels] == ["fill", "attn_fwd"]
    s = summarize(kernels, gpu=H200, flops=1e12, nbytes=1e9)
    assert s["kernel"] == "attn_fwd" and s["duration_us"] == 1250.0 and s["total_duration_us"] == 1252.5
    assert s["stall_source"] == "metrics"
    assert s["stalls"] == [{"reason": "long_scoreboard", "pct": 45.0}, {"reason": "barrier", "pct": 15.0}]
    assert s["tensor_pipe_pct"] == 61.5
    assert s["bank_conflicts"]["load"] == 1_234_567 and s["bank_conflicts"]["store"] == 0
    text = render(s)
    assert "2 kernels in the call" in text and "tensor pipe 61.5%" in text and "1,234,567 on loads" in text


def test_output_without_a_table_or_with_only_a_header_has_no_kernels():
    assert parse_details_csv("") == []
    assert parse_details_csv("==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n") == []
    assert parse_details_csv(HEADER + "\n") == []
    with pytest.raises(ValueError):
        summarize([])


def test_numbers_with_separators_and_missing_values():
    assert to_number("1,114,215,527,230.59") == pytest.approx(1114215527230.59)
    assert to_number("n/a") is None and to_number("no data") is None and to_number("") is None
