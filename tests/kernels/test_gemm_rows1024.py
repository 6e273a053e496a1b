"""gemm/cuda_wgmma's rows1024 entry: from 257 to 1024 rows, where whole 128 x 128 tiles make one wave at least
WAVE_FILL full, the plan runs them rather than split K or a tail (as ROWS256's WAVE_FILL does up to 256 rows, there of
any width). They are the larger shapes' own 128-wide build, whole, as the split-K tests run it on a GPU; on the CPU
the rule moves the shapes it names and only those. And the short 64 x 320 tile past 256 rows (SHORT_ROWS)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from test_gemm_epilogue_rounds import seed_with
from test_gemm_splitk import check_shipped, layout, work

from avo.agent.heuristic.knobs import parse_knobs
from avo.evaluate.worker.loader import load_entry

FOLDER = Path(__file__).resolve().parents[2] / "kernels" / "gemm" / "cuda_wgmma"
SEED = load_entry(FOLDER, "gemm").__globals__
# (M, N, K): tiles of 128 x 128 in one wave, whole, with the rule on; each split in K without it
MOVED = {
    (512, 4096, 28672): 128,   # before: 64 of 128 x 256 in 2
    (448, 3584, 28672): 112,   # 85% of a wave
    (768, 2560, 28672): 120,
    (320, 5120, 28672): 120,   # ragged rows: 3 tile rows, the last of 64
}
# left as they were: a wave under 80% full (96 of 128 x 128), where only a wider tile makes one wave (114 of 128 x 192,
# 117 of 128 x 320), past 1024 rows, up to 256 (ROWS256's own), no wave at all
LEFT = [(384, 4096, 14336), (768, 3584, 18944), (384, 12288, 14336), (1536, 4096, 14336), (256, 7168, 28672),
        (1024, 8192, 28672)]


def test_the_entry_is_one_knob_the_heuristic_tunes_for_its_bucket():
    knobs = {k.name: k for k in parse_knobs((FOLDER / "kernel.py").read_text()) if k.bucket == "rows1024"}
    assert set(knobs) == {"WAVE_FILL@rows1024"}
    assert SEED["ROWS1024"]["WAVE_FILL"] == 0.8 and {0.0, 0.8} <= set(knobs["WAVE_FILL@rows1024"].choices)


def test_one_wave_of_whole_128_wide_tiles_from_257_to_1024_rows_replaces_a_split(tmp_path):
    on, off = SEED, seed_with(tmp_path, {"WAVE_FILL@rows1024": 0.0}, "off")[1].__globals__
    for (m, n, k), tiles in MOVED.items():
        planned, before = on["plan"](m, n, k, 132), off["plan"](m, n, k, 132)
        assert (planned.build.block_m, planned.build.block_n, planned.tiles, work(planned)) == \
            (128, 128, tiles, "whole"), (m, n, k)
        assert planned.build is on["_LARGE"][128], (m, n, k)  # the larger shapes' build, not ROWS256's
        assert work(before) == "split", (m, n, k, before)
    for shape in LEFT:
        planned, before = on["plan"](*shape, 132), off["plan"](*shape, 132)
        assert layout(planned) == layout(before), shape
    assert work(on["plan"](384, 4096, 14336, 132)) == "split"  # 66 tiles of 128 x 192 in 2 beat 96 whole (73%)


def test_the_short_tile_is_weighed_up_to_short_rows(tmp_path):
    """SHORT_ROWS 384: past 256 rows one wave of whole 64 x 320 tiles where the 128-row tiles leave a tile row half
    idle; at 256 the 128-row tiles of before; past 384 never."""
    assert SEED["SHORT_ROWS"] == 384
    before = seed_with(tmp_path, {"SHORT_ROWS": 256}, "rows256")[1].__globals__
    for shape, tiles in {(257, 8192, 28672): 130, (320, 8192, 8192): 130, (384, 6144, 8192): 120}.items():
        planned, old = SEED["plan"](*shape, 132), before["plan"](*shape, 132)
        assert (planned.build.block_m, planned.build.block_n, planned.tiles, work(planned)) == \
            (64, 320, tiles, "whole"), shape
        assert old.build.block_m == 128, shape
    # past 384 rows; K under SHORT_MIN_K; the few-token rows where their tiles would pass a wave (FEW_LARGE_WAVES)
    for shape in ((448, 6144, 8192), (512, 4096, 8192), (320, 8192, 1024), (71, 18944, 4096), (128, 18944, 8192)):
        assert SEED["plan"](*shape, 132).build.block_m == 128, shape


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("shape", [(320, 5120, 28672), (512, 3584, 18944), (1000, 2048, 14336)])
def test_the_wave_of_128_wide_tiles_is_correct_and_bitwise_repeatable(shape, dtype):
    assert work(SEED["plan"](*shape, 132)) == "whole"
    check_shipped(FOLDER, shape, dtype)
