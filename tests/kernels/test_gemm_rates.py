"""gemm/cuda_wgmma's estimate weighs the 128-wide tile at RATE_128 in a plan of whole tiles and at RATE_128_SPLIT in one
that splits them (a tail, split-K, stream-K): with two accumulator sets its whole plans ran faster than one rate put
them, its split ones did not. The shapes named here are ones timed both ways (BENCHMARKS.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_gemm_epilogue_rounds import seed_with
from test_gemm_splitk import layout

from avo.evaluate.worker.loader import load_entry

FOLDER = Path(__file__).resolve().parents[2] / "kernels" / "gemm" / "cuda_wgmma"
SEED = load_entry(FOLDER, "gemm").__globals__
SMS = 132


def test_the_128_wide_tile_has_a_rate_for_whole_plans_and_one_for_split_plans():
    assert (SEED["RATE_128"], SEED["RATE_128_SPLIT"]) == (0.93, 0.88)
    narrow = SEED["_LARGE"][128]
    assert (narrow.rate, narrow.split_rate) == (0.93, 0.88)
    for width, build in SEED["_LARGE"].items():  # the other widths: one rate
        if width != 128:
            assert build.split_rate == build.rate, width
    # 384 tiles of 128 steps: 3 waves whole at 0.93; with a tail, every wave at 0.88 (half a 128 x 256 tile each step)
    time = SEED["_time"]
    assert time(narrow, 384, 384, 1, 128, SMS) == pytest.approx(3 * 128 * 0.5 / 0.93)
    assert time(narrow, 400, 396, 4, 128, SMS) == pytest.approx(3 * 128 * 0.5 / 0.88 + (32 * 0.5 / 0.88 + 5 * 5 * 0.5))
    # stream-K splits its tiles too: past 3 whole waves, 4 tiles of 128 steps dealt to 64 blocks (runs of
    # MIN_RUN_STEPS 8), each tile in 16 pieces, whose partials are charged as the tail's
    streamed, blocks, pieces = SEED["_stream_time"](narrow, 400, 396, 128, SMS)
    assert (blocks, pieces) == (64, 16)
    assert streamed == pytest.approx((3 * 128 + 8) * 0.5 / 0.88 + 17 * 5 * 0.5)


# (M, N, K): the plan's layout, and the one of a single rate of 0.88 (before); each timed side by side on an H100
MOVED = {
    (384, 14336, 3584): ((128, 128, 336, 336, 1, 0), (128, 192, 225, 225, 1, 0)),  # 0.928 -> 0.973x cuBLAS
    (200, 7168, 14336): ((128, 128, 112, 112, 1, 0), (128, 256, 56, 0, 2, 0)),  # 0.840 -> 0.900
    (768, 8192, 8192): ((128, 128, 384, 384, 1, 0), (128, 256, 192, 132, 2, 0)),  # 0.959 -> 0.979
}
# where one rate of 0.93 sent them to 128-wide tails or splits, which lost: the plan keeps what it had
KEPT = {
    (1024, 4608, 18944): ((128, 192, 192, 132, 2, 0), (128, 128, 288, 264, 4, 0)),  # 1.009; the 128-wide tail 0.963
    (768, 3584, 28672): ((128, 256, 84, 0, 3, 0), (128, 128, 168, 132, 3, 0)),  # 0.992; 0.954
}


def test_whole_128_wide_plans_move_and_split_ones_do_not(tmp_path):
    before = seed_with(tmp_path, {"RATE_128": 0.88}, "one_rate")[1].__globals__
    one_rate = seed_with(tmp_path, {"RATE_128_SPLIT": 0.93}, "one_high_rate")[1].__globals__
    for shape, (planned, old) in MOVED.items():
        assert layout(SEED["plan"](*shape, SMS)) == planned, shape
        assert layout(before["plan"](*shape, SMS)) == old, shape
    for shape, (planned, split) in KEPT.items():
        assert layout(SEED["plan"](*shape, SMS)) == layout(before["plan"](*shape, SMS)) == planned, shape
        assert layout(one_rate["plan"](*shape, SMS)) == split, shape
