"""The b200 profile matches the sourced table in avo/gpus.py, row by row, and each row names its source."""

from __future__ import annotations

import re
from pathlib import Path

import avo.gpus
from avo.gpus import PROFILES

ROW = re.compile(r"^\s*#\s+(\w+) = ([\d.]+)\s+(\S.*)$")


def _b200_table() -> dict[str, tuple[float, str]]:
    """figure -> (value, source text) from the comment table between the B200 TABLE markers."""
    text = Path(avo.gpus.__file__).read_text()
    block = text[text.index("# B200 TABLE"):text.index("# END B200 TABLE")]
    rows, last = {}, None
    for line in block.splitlines():
        match = ROW.match(line)
        if match:
            last = match.group(1)
            rows[last] = (float(match.group(2)), match.group(3))
        elif last and line.strip().lstrip("#").strip():  # a source continued on the next line
            rows[last] = (rows[last][0], rows[last][1] + " " + line.strip().lstrip("#").strip())
    return rows


def test_every_b200_figure_in_the_table_is_the_profiles_own():
    table, b200 = _b200_table(), PROFILES["b200"]
    assert set(table) >= {"sms", "smem_per_sm_kb", "smem_per_block_kb", "l2_mb", "hbm_gbps", "peak_bf16_tflops",
                          "peak_fp16_tflops", "peak_fp8_tflops", "tmem_per_sm_kb", "regs_per_sm"}
    for figure, (value, _) in table.items():
        assert getattr(b200, figure) == value, figure


def test_each_b200_row_names_a_source():
    for figure, (_, source) in _b200_table().items():
        assert "https://" in source or source.startswith("same "), figure


def test_b200_differs_from_hopper_where_blackwell_does():
    b200, h200 = PROFILES["b200"], PROFILES["h200"]
    assert b200.arch == "sm_100a" and b200.compute_capability == (10, 0)
    assert b200.tmem_per_sm_kb == 256 and h200.tmem_per_sm_kb == 0
    assert b200.peak_fp8_tflops == 2 * b200.peak_bf16_tflops  # HGX B200 specifications: 9 vs 4.5 PFLOPS sparse
    assert b200.smem_per_block_kb == h200.smem_per_block_kb  # unchanged from Hopper (programming guide table)
