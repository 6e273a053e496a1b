"""gemm/cuda_wgmma's DESC_OFFSETS and UNIFORM_WG, on in the seed but in its 128 x 320 tile (DESC_WIDE off). With
DESC_OFFSETS a consumer finds each wgmma's shared-memory descriptors by adding the operand's offset to those of the
ring's first tiles, where it otherwise makes each anew from its address; with UNIFORM_WG the warpgroup's index is
read as warp-uniform, so the compiler keeps the consumers' loop state and descriptors in uniform registers. On the
CPU the seed has them where it says, each reaches every build, the builds holding the most accumulators compile for
Hopper without spills with both on, and nvcc's SASS has fewer instructions between the wgmma of one step with
DESC_OFFSETS and fewer still with both; on a GPU every configuration the wrapper can choose gives the bits it gives
with them off, call after call, B row-major or read as [N, K]: with each, with both, and as shipped."""

from __future__ import annotations

from pathlib import Path

import needs
import pytest
import torch
from test_gemm_epilogue_rounds import seed_with
from test_gemm_splitk import SEED, SHAPES, check_compiles_without_spills, check_same_bits

from avo.evaluate.worker.loader import load_entry

KNOBS = ("DESC_OFFSETS", "UNIFORM_WG")
OFF = {"DESC_OFFSETS": False, "UNIFORM_WG": False}
VARIANTS = {"desc": {"DESC_OFFSETS": True, "UNIFORM_WG": False, "DESC_WIDE": True},
            "uniform": {"DESC_OFFSETS": False, "UNIFORM_WG": True, "DESC_WIDE": True},
            "both": {"DESC_OFFSETS": True, "UNIFORM_WG": True, "DESC_WIDE": True},
            "shipped": {}}


def variant(tmp_path, name: str):
    """The seed with VARIANTS[name] (or OFF, name "off"), in a folder of its own: (folder, its gemm)."""
    return seed_with(tmp_path, OFF if name == "off" else VARIANTS[name], name)


def _builds(g) -> list:
    """Every build the wrapper declares: the few-token ones, the tables' widths and the short tile."""
    builds = [g["_FEW"], g["_FEW_M64"], g["_NARROW"], g["_NARROW_M64"], g["_NARROW_FULL_M64"], g["_SHORT"],
              *g["_LARGE"].values(), *g["_ROWS256"].values()]
    return [b for b in builds if b is not None]


def _wide(build) -> bool:
    return (build.block_m, build.block_n) == (128, 320)


def test_the_seed_has_both_on_but_in_the_128_x_320_tile_and_each_knob_reaches_every_build(tmp_path):
    shipped = load_entry(SEED, "gemm").__globals__
    assert all(shipped[k] for k in KNOBS) and not shipped["DESC_WIDE"]
    assert any(_wide(b) for b in _builds(shipped))
    for b in _builds(shipped):
        assert all((k in b.defines) != _wide(b) for k in KNOBS), (b.block_m, b.block_n, b.defines)
    assert not any(k in b.defines for b in _builds(variant(tmp_path, "off")[1].__globals__) for k in KNOBS)
    for name in ("desc", "uniform"):
        g = variant(tmp_path, name)[1].__globals__
        (knob,) = [k for k in KNOBS if VARIANTS[name][k]]
        (other,) = set(KNOBS) - {knob}
        assert all(b.defines[knob] == 1 and other not in b.defines for b in _builds(g)), name
        assert len({b.block_n for b in _builds(g)}) >= 5  # 64, 128, 192, 256, 320


def test_the_heuristic_agent_expects_nothing_of_them_until_they_are_measured():
    from avo.agent.heuristic.knobs import parse_knobs, point_of
    from avo.agent.heuristic.rules import Shape, fixed_roles, roles
    from avo.agent.heuristic.speed import estimate

    text = (SEED / "kernel.py").read_text()
    knobs = parse_knobs(text)
    shape = Shape(kind="gemm", roles=roles(knobs), fixed=fixed_roles(text, knobs))
    seed = point_of(knobs)
    for knob in (*KNOBS, "DESC_WIDE"):
        guess = estimate(shape, seed, dict(seed, **{knob: not seed[knob]}), None)
        assert guess.gain == 0 and guess.reason == "no rule predicts this one: measure it", (knob, guess)


@needs.nvcc
def test_the_builds_holding_the_most_accumulators_compile_without_spills_with_both_on(tmp_path):
    folder, gemm = variant(tmp_path, "both")
    g = gemm.__globals__
    # 160 and 128 fp32 accumulators a thread (the 320-wide tiles, 256 wide), and the 320-wide tiles' twins reading
    # an [N, K] B (128 x 128 in two sets compiles in the next test)
    builds = [g["_LARGE"][320], g["_SHORT"], g["_LARGE"][256]]
    flags = [b.module.build for b in builds] + [b.k_major().build for b in (g["_LARGE"][320], g["_SHORT"])]
    assert all("-DDESC_OFFSETS=1" in f.flags and "-DUNIFORM_WG=1" in f.flags for f in flags)
    check_compiles_without_spills(folder, flags)


def _between_wgmma(cubin: Path) -> int:
    """Instructions between one wgmma and the next of the same step (no barrier wait or warpgroup fence between
    them), summed over gemm_bf16's SASS."""
    from avo.profile.sass import sass_opcodes, sass_text, split_sass_functions

    ops = sass_opcodes(split_sass_functions(sass_text(cubin))["gemm_bf16"])
    total, run = 0, None  # run: instructions since the last HGMMA of this step, None outside a step
    for op in ops:
        if op == "HGMMA":
            total += run or 0
            run = 0
        elif op in ("SYNCS", "WARPGROUP"):
            run = None
        elif run is not None:
            run += 1
    return total


@needs.nvcc
def test_each_leaves_fewer_instructions_between_a_steps_wgmma(tmp_path):
    """On the 128 x 128 tile in two sets (256 x 8192 x 8192's build), where the profile found the instructions; the
    counts of every build are in BENCHMARKS.md. Each build compiles without spills."""
    counts = {}
    for name in ("off", "desc", "both"):
        folder, gemm = variant(tmp_path, name)
        build = gemm.__globals__["plan"](256, 8192, 8192, 132).build
        cubins = tmp_path / f"cubins-{name}"
        cubins.mkdir()
        resources = check_compiles_without_spills(folder, [build.module.build], cubin_dir=cubins)
        counts[name] = _between_wgmma(next(Path(f["cubin"]) for key, f in resources.items()
                                           if key.startswith("gemm_bf16")))
    assert 0 < counts["both"] < 0.8 * counts["desc"] and counts["desc"] < 0.8 * counts["off"], counts


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name", list(VARIANTS))
def test_each_gives_the_same_bits_for_every_configuration(name, dtype, tmp_path):
    needs.module("cupy")
    check_same_bits(variant(tmp_path, name)[1], variant(tmp_path, "off")[1], SHAPES, dtype, "with both off",
                    repeats=2, k_major=True)
