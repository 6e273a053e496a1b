"""scripts/sass_stalls.py reads Nsight Compute's source page (CSV, SASS view): a small page written here in its
layout (the kernel's name line, the header, one row per instruction, numbers with thousands separators). The GPU
run's figures are in BENCHMARKS.md."""

from __future__ import annotations

import csv

import pytest
from script_module import script

HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)",
          "Instructions Executed", "stall_barrier", "stall_long_sb", "stall_wait", "stall_barrier (Not Issued)",
          "stall_long_sb (Not Issued)", "stall_wait (Not Issued)"]
ROWS = [
    ["0x7f0000002750", "      SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R152+URZ], R17", "4", "4", "229,376", "0", "0", "4",
     "0", "0", "4"],
    ["0x7f0000002810", "@!P0  BRA 0x7f0000007740", "30", "29", "229,376", "0", "28", "2", "0", "28", "1"],
    ["0x7f0000002c30", "      WARPGROUP.DEPBAR.LE gsb0, 0x1", "60", "60", "229,376", "58", "0", "2", "58", "0", "2"],
    ["0x7f0000007740", "      SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R152+URZ], R17", "6", "6", "1,389", "0", "6", "0",
     "0", "6", "0"],
]


@pytest.fixture
def page(tmp_path):
    path = tmp_path / "plan_sass.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f, quoting=csv.QUOTE_ALL)
        writer.writerow(["Kernel Name", "gemm_bf16", ""])
        writer.writerow(HEADER)
        writer.writerows(ROWS)
    return path


def test_the_instructions_are_read_with_their_counts_and_reasons(page):
    found = script("sass_stalls").read(page)
    assert [i.address & 0xFFFF for i in found] == [0x2750, 0x2810, 0x2C30, 0x7740]
    assert found[0].executed == 229376 and found[3].executed == 1389
    assert found[1].stalls == {"barrier": 0.0, "long_sb": 28.0, "wait": 2.0}  # not the "(Not Issued)" columns


def test_the_reasons_shares_and_the_hottest_instructions(page):
    s = script("sass_stalls")
    found = s.read(page)
    shares = s.reason_shares(found)
    assert list(shares) == ["barrier", "long_sb", "wait"]
    assert shares["barrier"] == pytest.approx(58 / 100) and shares["long_sb"] == pytest.approx(34 / 100)
    assert [i.address & 0xFFFF for i in s.hottest(found, 2)] == [0x2C30, 0x2810]
    assert [i.executed for i in s.waits(found)] == [229376, 1389]  # the first tries, then the retries


def test_a_page_without_the_source_table_is_named_in_the_error(tmp_path):
    path = tmp_path / "details.csv"
    path.write_text('"ID","Section Name","Metric Name"\n"0","SpeedOfLight","Duration"\n')
    with pytest.raises(ValueError, match="--page source"):
        script("sass_stalls").read(path)
