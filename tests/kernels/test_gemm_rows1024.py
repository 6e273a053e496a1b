"""gemm/cuda_wgmma's rows1024 entry: from 257 to 1024 rows, where one of the 128-row widths makes one wave of whole
tiles at least WAVE_FILL full, the plan runs them whole rather than split K or a tail (as ROWS256's WAVE_FILL does up
to 256 rows). The tiles are the larger shapes' own builds, whole, as every test of those builds runs them; on the CPU
the rule moves the shapes it names and only those."""

from __future__ import annotations

from pathlib import Path

from test_gemm_epilogue_rounds import seed_with
from test_gemm_splitk import work

from avo.agent.heuristic.knobs import parse_knobs
from avo.evaluate.worker.loader import load_entry

FOLDER = Path(__file__).resolve().parents[2] / "kernels" / "gemm" / "cuda_wgmma"
SEED = load_entry(FOLDER, "gemm").__globals__
# (M, N, K): (width, tiles) of one wave of whole tiles with the rule at 0.85; each split K or a tail without it
MOVED = {
    (768, 3584, 18944): (192, 114),   # 6 x 19 tiles of 128 x 192; before: 168 of 128 x 128, the last 36 in 3
    (512, 4096, 14336): (128, 128),   # before: 64 of 128 x 256 in 2
    (1024, 4608, 14336): (320, 120),  # before: 192 of 128 x 192, the last 60 in 2
    (320, 7168, 28672): (192, 114),   # ragged rows: 3 tile rows, the last of 64
}
# left as they were: a wave under 85% full (96 and 112 of 128 x 128), past 1024 rows, up to 256 (ROWS256's own)
LEFT = [(384, 4096, 14336), (512, 3584, 18944), (1536, 4096, 14336), (256, 7168, 28672), (1024, 8192, 28672)]


def test_the_entry_is_one_knob_the_heuristic_tunes_for_its_bucket():
    knobs = {k.name: k for k in parse_knobs((FOLDER / "kernel.py").read_text()) if k.bucket == "rows1024"}
    assert set(knobs) == {"WAVE_FILL@rows1024"}
    assert {0.0, 0.85} <= set(knobs["WAVE_FILL@rows1024"].choices)


def test_one_wave_of_whole_tiles_from_257_to_1024_rows_replaces_a_split_or_a_tail(tmp_path):
    on = seed_with(tmp_path, {"WAVE_FILL@rows1024": 0.85}, "on")[1].__globals__
    off = seed_with(tmp_path, {"WAVE_FILL@rows1024": 0.0}, "off")[1].__globals__
    for (m, n, k), (width, tiles) in MOVED.items():
        planned, before = on["plan"](m, n, k, 132), off["plan"](m, n, k, 132)
        assert (planned.build.block_m, planned.build.block_n, planned.tiles, work(planned)) == \
            (128, width, tiles, "whole"), (m, n, k)
        assert planned.build is on["_LARGE"][width], (m, n, k)  # the larger shapes' builds, not ROWS256's
        assert work(before) in ("split", "tail"), (m, n, k, before)
    for shape in LEFT:
        planned, before = on["plan"](*shape, 132), off["plan"](*shape, 132)
        assert (planned.build.block_m, planned.build.block_n, planned.tiles, planned.whole, planned.splits,
                planned.stream) == (before.build.block_m, before.build.block_n, before.tiles, before.whole,
                                    before.splits, before.stream), shape
    assert work(on["plan"](384, 4096, 14336, 132)) == "split"  # 66 tiles of 128 x 192 in 2 beat 96 whole (73%)
