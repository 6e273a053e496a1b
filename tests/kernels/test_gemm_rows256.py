"""gemm/cuda_wgmma's rows256 entry: from FEW_ROWS to 256 rows the 128-row tiles take their own builds, the widest 4
stages deep with C stored in 2 rounds, and MMA_LAG on every width whose ring holds 4 or more stages. On the CPU the
plan hands those shapes, and only those, to these builds, and they compile without spills; on a GPU every kind of
work on them is correct and bitwise repeatable, B row-major or read as the transpose of a [N, K] weight."""

from __future__ import annotations

from pathlib import Path

import needs
import pytest
import torch
from test_gemm_epilogue_rounds import seed_with
from test_gemm_splitk import check_compiles_without_spills, check_reads_weight_in_place, check_shipped, layout, work

from avo.agent.heuristic.knobs import parse_knobs
from avo.evaluate.worker.loader import load_entry

FOLDER = Path(__file__).resolve().parents[2] / "kernels" / "gemm" / "cuda_wgmma"
SEED = load_entry(FOLDER, "gemm").__globals__
# (M, N, K): (width, work) the shipped plan gives them, every width and kind of work of the rows256 builds
SHAPES = {
    (129, 1024, 1024): (128, "whole"),
    (200, 1024, 2048): (128, "split"),
    (256, 5120, 8192): (256, "split"),
    (256, 21504, 8192): (256, "tail"),
    (160, 6144, 8192): (192, "split"),
    (256, 9216, 8192): (320, "split"),
    (136, 8192, 14336): (128, "whole"),   # one wave of whole tiles (WAVE_FILL), ragged rows
    (200, 18944, 18944): (320, "whole"),  # the same, 120 tiles of 128 x 320
}


def test_the_rows256_entry_takes_its_own_builds_up_to_256_rows_only():
    deep, shallow = SEED["_ROWS256"], SEED["_LARGE"]
    assert (deep[256].defines["STAGES"], deep[256].defines["C_STAGED"], deep[256].defines["MMA_LAG"]) == (4, 2, True)
    assert deep[128].defines["MMA_LAG"] and deep[128].defines["STAGES"] == 6
    assert "C_STAGED" not in deep[128].defines  # its 6 stages fit beside the whole C tile: no rounds
    # a ring of 3 keeps its products waited on: the 320-wide build is the other entries' own
    assert deep[320] is shallow[320] and not deep[192].defines["MMA_LAG"]
    assert not any(b.defines["MMA_LAG"] or "C_STAGED" in b.defines for n, b in shallow.items() if n != 320)
    for (m, n, k), (width, kind) in SHAPES.items():
        planned = SEED["plan"](m, n, k, 132)
        assert (planned.build.block_n, work(planned)) == (width, kind), (m, n, k)
        assert planned.build is deep[width], (m, n, k)
    own = {id(b) for b in deep.values()} - {id(b) for b in shallow.values()}
    for m, n, k in ((128, 8192, 8192), (128, 57344, 8192), (257, 8192, 8192), (1024, 4096, 14336)):
        assert id(SEED["plan"](m, n, k, 132).build) not in own, (m, n, k)  # the few-token bucket and the next


def test_the_entry_is_five_knobs_the_heuristic_tunes_for_its_bucket(tmp_path):
    names = {k.name for k in parse_knobs((FOLDER / "kernel.py").read_text()) if k.bucket == "rows256"}
    assert names == {"STAGES@rows256", "EPILOGUE_SPLIT@rows256", "MMA_LAG@rows256", "CLUSTER_N@rows256",
                     "WAVE_FILL@rows256"}
    _, gemm = seed_with(tmp_path, {"STAGES@rows256": 3, "EPILOGUE_SPLIT@rows256": 1, "MMA_LAG@rows256": False})
    g = gemm.__globals__
    assert all(g["_ROWS256"][n] is g["_LARGE"][n] for n in g["_LARGE"])  # the entry off: one set of builds


def test_one_wave_of_whole_tiles_up_to_256_rows_replaces_a_split_but_not_by_the_short_tile(tmp_path):
    """WAVE_FILL: where one of the entry's widths makes one wave of 128-row tiles at least 90% full, the plan runs them
    whole rather than split a wider tile; at 0 the splits of before. The short tile keeps its own rule."""
    assert SEED["ROWS256"]["WAVE_FILL"] == 0.9
    off = seed_with(tmp_path, {"WAVE_FILL@rows256": 0.0}, "off")[1].__globals__
    for (m, n, k), (width, tiles) in {(256, 8192, 28672): (128, 128), (129, 8192, 28672): (128, 128),
                                      (224, 18944, 28672): (320, 120), (136, 18944, 18944): (320, 120)}.items():
        planned, before = SEED["plan"](m, n, k, 132), off["plan"](m, n, k, 132)
        assert (planned.build.block_m, planned.build.block_n, planned.tiles, work(planned)) == \
            (128, width, tiles, "whole"), (m, n, k)
        assert planned.build is SEED["_ROWS256"][width] and work(before) != "whole", (m, n, k, before)
    # under 90% of a wave (112 tiles of 128 x 128), past 256 rows, and where only the short tile makes one wave
    for shape in ((256, 7168, 28672), (384, 8192, 28672), (256, 10240, 28672)):
        planned, before = SEED["plan"](*shape, 132), off["plan"](*shape, 132)
        assert layout(planned) == layout(before), shape
    assert work(SEED["plan"](256, 10240, 28672, 132)) == "split"


@needs.nvcc
def test_the_rows256_builds_compile_for_hopper_without_spills(tmp_path):
    from avo.cuda import declared_builds

    folder, _ = seed_with(tmp_path, {})
    # the entry's builds, the only ones with the lagged wgmma wait (the seed's others: test_cuda_seeds.py)
    resources = check_compiles_without_spills(folder, [b for b in declared_builds(folder) if "-DMMA_LAG=1" in b.flags])
    lagged = [facts for facts in resources.values() if "MMA_LAG=1" in facts["defines"]]  # (simple.cu compiles too)
    assert len(lagged) >= 4  # bf16 and fp16 of the 256- and 128-wide rows256 builds


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_rows256_builds_are_correct_and_bitwise_repeatable(shape, dtype):
    check_shipped(FOLDER, shape, dtype)


@pytest.mark.gpu
def test_the_rows256_builds_read_a_transposed_weight_in_place():
    needs.module("cupy")
    check_reads_weight_in_place(load_entry(FOLDER, "gemm"), [(256, 5120, 8192), (200, 1024, 2048), (256, 21504, 8192)],
                                "rows256")
