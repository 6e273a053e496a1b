"""gemm/cuda_wgmma's edge rows: a last tile row that holds half a tile of rows of M or fewer (192 rows: 128 + 64; 96
rows on the 64-row tiles: 64 + 32) loads only those, one box of half the tile's rows of A through its own tensor map
(gemm.cu's EDGE_ROWS), where a box half past M ran slow; with EDGE_ANY (shipped) any last tile row with rows past M
loads a box of its rows rounded up to 8. On the CPU the plan gives the shapes below each kind of work, with an edge
row and without (the shipped builds compile without spills in test_cuda_seeds.py); on a GPU such rows, in every kind
of work and with clusters (whose second tile may lie wholly past M), are correct and bitwise repeatable, B row-major
or read as the transpose of a [N, K] weight."""

from __future__ import annotations

from pathlib import Path

import needs
import pytest
import torch
from test_gemm_epilogue_rounds import seed_with
from test_gemm_splitk import (arrivals_reset, check_compiles_without_spills, check_reads_weight_in_place,
                              check_repeatable, check_shipped, work)

from avo.evaluate.worker.loader import load_entry

FOLDER = Path(__file__).resolve().parents[2] / "kernels" / "gemm" / "cuda_wgmma"
# (M, N, K): (width, work, rows of M in the last tile row) as the shipped plan takes them
SHAPES = {
    (192, 2048, 1024): (128, "whole", 64),  # rows256's 128-wide build
    (160, 5120, 8192): (256, "split", 32),
    (190, 21504, 8192): (256, "tail", 62),
    (9000, 8192, 4096): (256, "stream", 40),
    (1080, 4000, 1000): (320, "whole", 56),  # ragged N and K too
    (200, 21504, 8192): (256, "tail", 72),  # past half a tile: EDGE_ANY's box of 72, the whole one without
    (100, 57344, 1024): (256, "whole", 100),  # few-token rows past one wave of 64-row tiles
    # the 64-row tiles: a 32-row box of A where the last tile row holds 32 rows or fewer
    (96, 4096, 1024): (64, "whole", 32),
    (16, 8192, 2048): (64, "whole", 16),  # the only tile row
    (80, 2048, 20000): (128, "split", 16),
    (24, 3000, 1000): (64, "whole", 24),  # ragged N and K too
    (48, 8192, 1024): (64, "whole", 48),  # past half a tile: EDGE_ANY's box of 48, the whole one without
}
CLUSTERED = [(192, 4096, 4096), (320, 8192, 1024), (1090, 4096, 1024)]  # split; a tile past M; whole


def test_the_shapes_take_each_kind_of_work_with_an_edge_row_or_without():
    g = load_entry(FOLDER, "gemm").__globals__
    for (m, n, k), (width, kind, left) in SHAPES.items():
        planned = g["plan"](m, n, k, 132)
        assert (planned.build.block_n, work(planned), m % planned.build.block_m) == (width, kind, left), (m, n, k)


def test_clustered_shapes_reach_an_edge_row_and_a_tile_past_m(tmp_path):
    g = seed_with(tmp_path, {"CLUSTER_M": 2}, "clustered")[1].__globals__
    for m, n, k in CLUSTERED:
        assert g["plan"](m, n, k, 132).build.cluster_m == 2, (m, n, k)
    planned = g["plan"](320, 8192, 1024, 132)  # three tile rows in pairs: the fourth lies wholly past M
    assert planned.tiles // -(-8192 // planned.build.block_n) * 2 * 128 - 320 >= 128


@pytest.mark.gpu
@pytest.mark.parametrize("shape", list(SHAPES))
def test_edge_rows_are_correct_and_bitwise_repeatable(shape, tmp_path):
    for dtype in (torch.bfloat16, torch.float16):
        check_shipped(FOLDER, shape, dtype)
    _, off = seed_with(tmp_path, {"EDGE_ANY": False}, "off")  # half a tile's box or the whole one
    check_repeatable(off, shape, torch.bfloat16, ("edge any off", shape))
    assert arrivals_reset(off), "edge any off: arrival counters left set"


@pytest.mark.gpu
def test_edge_rows_with_clusters_are_correct_and_bitwise_repeatable(tmp_path):
    needs.module("cupy")
    _, gemm = seed_with(tmp_path, {"CLUSTER_M": 2}, "clustered")
    for shape in CLUSTERED:
        check_repeatable(gemm, shape, torch.bfloat16, ("clustered", shape))
    assert arrivals_reset(gemm), "clustered: arrival counters left set"


@pytest.mark.gpu
def test_edge_rows_read_a_transposed_weight_in_place():
    needs.module("cupy")
    check_reads_weight_in_place(load_entry(FOLDER, "gemm"), [(192, 2048, 1024), (160, 5120, 8192), (190, 21504, 8192)],
                                "edge")


# EDGE_ANY (on as shipped): every last tile row with rows past M loads only its rows, rounded up to 8. (M, N, K): the
# rows of A the edge row's box holds on the shipped plan's tile, with EDGE_ANY, and without (0: a whole tile's box)
ANY_SHAPES = {
    (200, 21504, 8192): (72, 0),  # 128-row tiles: 72 rows in the last, past half a tile
    (100, 57344, 1024): (104, 0),  # 100 rows: one 128-row tile row, rounded up to 104
    (48, 8192, 1024): (48, 0),  # 64-row tiles, one wave
    (60, 4096, 16384): (64, 0),  # 60 rows round up to the whole box; split
    (1, 4096, 1000): (8, 32),  # a box of 8 rows for one row of M
    (192, 2048, 1024): (64, 64),  # half a tile: the same box either way
    (4096, 4096, 4096): (0, 0),  # no edge row
}


def test_edge_any_sizes_the_edge_box_by_the_rows_of_m_and_turns_off_to_half_a_tile(tmp_path):
    shipped = load_entry(FOLDER, "gemm").__globals__
    assert shipped["EDGE_ANY"] is True
    _, off = seed_with(tmp_path, {"EDGE_ANY": False}, "off")
    g = off.__globals__
    for (m, n, k), (rows, before) in ANY_SHAPES.items():
        build = shipped["plan"](m, n, k, 132).build
        assert build.edge_box(m) == rows and g["plan"](m, n, k, 132).build.edge_box(m) == before, (m, n, k)
        assert build.defines.get("EDGE_ANY") == 1
    assert all("EDGE_ANY" not in b.defines for b in (*g["_LARGE"].values(), g["_FEW"], g["_NARROW"]))
    _, pairs = seed_with(tmp_path, {"CLUSTER_N@few": 2}, "pairs")
    paired = pairs.__globals__["plan"](48, 8192, 1024, 132).build
    assert paired.cluster_n == 2 and "EDGE_ANY" not in paired.defines  # a pair's share of A: no such box
    assert paired.edge_box(16) == paired.edge_box(48) == 0  # its edge rows come through map_a


@needs.nvcc
def test_the_builds_without_edge_any_compile_for_hopper_without_spills(tmp_path):
    """The shipped builds (EDGE_ANY on) compile in test_cuda_seeds.py; here those the knob turned off gives."""
    from avo.cuda import declared_builds

    load_entry(FOLDER, "gemm")  # declares its builds in this process
    shipped = {tuple(b.flags) for b in declared_builds(FOLDER)}
    assert sum("-DEDGE_ANY=1" in b.flags for b in declared_builds(FOLDER)) >= 8  # every 128-row width, 64-row ring
    folder, _ = seed_with(tmp_path, {"EDGE_ANY": False}, "off")
    builds = [b for b in declared_builds(folder) if tuple(b.flags) not in shipped]
    assert len(builds) >= 8 and not any("-DEDGE_ANY=1" in b.flags for b in builds), [b.flags for b in builds]
    check_compiles_without_spills(folder, builds)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", list(ANY_SHAPES))
def test_edge_any_rows_are_correct_and_bitwise_repeatable(shape):
    needs.module("cupy")
    gemm = load_entry(FOLDER, "gemm")
    for dtype in (torch.bfloat16, torch.float16):
        check_repeatable(gemm, shape, dtype, ("edge any", shape))
    assert arrivals_reset(gemm), "edge any: arrival counters left set"


# NARROW_FULL_FROM 1 (as shipped): the whole 64 x 64 tiles at 32 rows or fewer on the 8-stage ring, with the edge box
# of their rows (EDGE_ANY) or of 32 (without): one wave, several (NARROW_WAVES), ragged N and K
FROM1_SHAPES = [(16, 8192, 2048), (1, 57344, 1024), (32, 8448, 1000), (8, 6144, 3000)]


def test_narrow_full_from_1_puts_the_few_row_shapes_on_the_8_stage_ring(tmp_path):
    g = load_entry(FOLDER, "gemm").__globals__
    off = seed_with(tmp_path, {"EDGE_ANY": False}, "off")[1].__globals__
    for m, n, k in FROM1_SHAPES:
        for g_, box in ((g, -(-m // 8) * 8), (off, 32)):
            planned = g_["plan"](m, n, k, 132)
            assert planned.build is g_["_NARROW_FULL_M64"] and work(planned) == "whole", (m, n, k)
            assert planned.build.defines["STAGES"] == 8 and planned.build.edge_box(m) == box, (m, n, k)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", FROM1_SHAPES)
def test_narrow_full_from_1_is_correct_and_bitwise_repeatable(shape, tmp_path):
    needs.module("cupy")
    _, off = seed_with(tmp_path, {"EDGE_ANY": False}, "off")
    for gemm, name in ((load_entry(FOLDER, "gemm"), "from 1"), (off, "from 1, 32-row box")):
        for dtype in (torch.bfloat16, torch.float16):
            check_repeatable(gemm, shape, dtype, (name, shape))
