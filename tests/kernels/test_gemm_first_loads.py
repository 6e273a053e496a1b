"""gemm/cuda_wgmma's producer issues its first unit's first stages before the work list's divisions, and its loop
keeps every TMA load's operands in uniform registers. Counted in thread 0 alone, the number of stages issued early
made the compiler move each load's coordinates out of per-thread registers (R2UR) on every step of the loop, and 256 x
8192 x 8192 lost 1% on an H100 (BENCHMARKS.md). The first unit's own loads may take such moves: they run once a call,
and the tile coordinates that branch around their divisions (which took the first load from 1,800 to 1,300 cycles
into the block) come out in per-thread registers. On the CPU: the shipped builds' SASS has no such move before a TMA
load of the producer's loop (past its register release), and scripts/gemm_startup_probe.py (which found where a small
GEMM's time went) still stamps a copy that compiles. The first loads' correctness is every GPU test of the seed's
plans (test_gemm_splitk.py and the others)."""

from __future__ import annotations

from pathlib import Path

import needs
from script_module import script
from test_gemm_splitk import SEED, check_compiles_without_spills

from avo.cuda import declared_builds
from avo.evaluate.worker.loader import load_entry
from avo.profile.sass import sass_opcodes, sass_text, split_sass_functions

# the few-token 64 x 64 tile (two consumers splitting K) at its two depths, the 256-row entry's 128 x 128 tile and
# the 128 x 256 tile
SHAPES = ({"-DBLOCK_N=64", "-DWG_SPLIT_K=1", "-DSTAGES=12"}, {"-DBLOCK_N=64", "-DWG_SPLIT_K=1", "-DSTAGES=8"},
          {"-DBLOCK_N=128", "-DMMA_LAG=1"}, {"-DBLOCK_N=256", "-DSTAGES=3"})


def moved_loads(sass: str, window: int = 8) -> list[int]:
    """The TMA loads of the producer's loop (their order among the function's instructions; the loop's are those
    past the first register release, USETMAXREG) with an R2UR in the `window` instructions before them: operands
    brought from per-thread registers into uniform ones for that load."""
    ops = sass_opcodes(sass)
    loop = ops.index("USETMAXREG") if "USETMAXREG" in ops else 0
    return [i for i, op in enumerate(ops) if i > loop and op == "UTMALDG" and "R2UR" in ops[max(loop, i - window):i]]


def test_moved_loads_finds_an_r2ur_before_a_load():
    line = "        /*{:04x}*/                   {} ;"
    ops = ["R2UR UR6, R2", "UTMALDG.2D [UR8], [UR6]", "USETMAXREG.DEALLOC.CTAPOOL 0x28", "UMOV UR4, UR5",
           "UTMALDG.2D [UR8], [UR4]", "@P1 R2UR UR6, R2", "ELECT P1, URZ, PT", "UTMALDG.2D [UR8], [UR6]"]
    sass = "\n".join(line.format(16 * i, op) for i, op in enumerate(ops))
    assert moved_loads(sass) == [7]  # the first load's move comes before the register release: the first unit's


@needs.nvcc
def test_every_tma_load_of_the_shipped_builds_takes_uniform_operands(tmp_path):
    load_entry(SEED, "gemm")  # declares its builds
    # (a test before may have declared a build's B_K_MAJOR twin: the row-major ones are those shipped)
    builds = [b for b in declared_builds(SEED) if any(shape <= set(b.flags) for shape in SHAPES) and
              "-DB_K_MAJOR=1" not in b.flags]
    assert len(builds) == len(SHAPES), [b.flags for b in builds]
    resources = check_compiles_without_spills(SEED, builds, cubin_dir=tmp_path)
    checked = 0
    for cubin in {Path(facts["cubin"]) for facts in resources.values()}:
        for name, sass in split_sass_functions(sass_text(cubin)).items():
            if name in ("gemm_bf16", "gemm_fp16"):  # (simple.cu compiles beside them)
                ops = sass_opcodes(sass)
                # the loop's loads, all past the release: as many as the first unit's, which come before it
                assert 2 * ops[ops.index("USETMAXREG"):].count("UTMALDG") == ops.count("UTMALDG") > 0, name
                assert not moved_loads(sass), f"{cubin.name} {name}: loads {moved_loads(sass)} take R2UR operands"
                checked += 1
    assert checked == 2 * len(SHAPES)  # bf16 and fp16 of each


@needs.nvcc
def test_the_startup_probes_copy_follows_the_seed_and_compiles(tmp_path):
    """scripts/gemm_startup_probe.py stamps a copy of the seed at anchors in its source: they must all still be
    there (each once), and the stamped 64 x 64 build must compile without spills."""
    probe = script("gemm_startup_probe")
    folder = probe.instrumented(tmp_path / "stamped")
    assert (folder / "gemm.cu").read_text().count("stamp(") == 1 + len(probe.STAMPS)  # the start, then each stamp
    gemm = load_entry(folder, "gemm")
    assert gemm.__globals__["_stamps"] is not None
    builds = [b for b in declared_builds(folder) if SHAPES[0] <= set(b.flags) and "-DB_K_MAJOR=1" not in b.flags]
    assert len(builds) == 1
    check_compiles_without_spills(folder, builds)
