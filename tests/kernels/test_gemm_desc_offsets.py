"""gemm/cuda_wgmma's DESC_OFFSETS: a consumer finds each wgmma's shared-memory descriptors by adding the operand's
offset to those of the ring's first tiles, where it otherwise makes each anew from its address. Off in the seed. On
the CPU it reaches every build, those holding the most accumulators compile for Hopper without spills with it on,
and nvcc's SASS has fewer instructions between the wgmma of one step; on a GPU every configuration the wrapper can
choose gives the bits it gives with it off, call after call, B row-major or read as [N, K]."""

from __future__ import annotations

from pathlib import Path

import needs
import pytest
import torch
from test_gemm_epilogue_rounds import seed_with
from test_gemm_splitk import SEED, SHAPES, arrivals_reset, check_compiles_without_spills, check_repeatable

from avo.evaluate.worker.loader import load_entry

ON = {"DESC_OFFSETS": True}


def offsets(tmp_path, name: str = "offsets"):
    """The seed with DESC_OFFSETS on, in a folder of its own: (folder, its gemm)."""
    return seed_with(tmp_path, ON, name)


def _builds(g) -> list:
    """Every build the wrapper declares: the few-token ones, the tables' widths and the short tile."""
    builds = [g["_FEW"], g["_FEW_M64"], g["_NARROW"], g["_NARROW_M64"], g["_NARROW_FULL_M64"], g["_SHORT"],
              *g["_LARGE"].values(), *g["_ROWS256"].values()]
    return [b for b in builds if b is not None]


def test_the_seed_makes_each_descriptor_anew_and_the_knob_reaches_every_build(tmp_path):
    shipped = load_entry(SEED, "gemm").__globals__
    assert shipped["DESC_OFFSETS"] is False
    assert not any("DESC_OFFSETS" in b.defines for b in _builds(shipped))
    g = offsets(tmp_path)[1].__globals__
    assert all(b.defines["DESC_OFFSETS"] == 1 for b in _builds(g))
    assert len({b.block_n for b in _builds(g)}) >= 5  # 64, 128, 192, 256, 320


def test_the_heuristic_agent_expects_nothing_of_it_until_it_is_measured():
    from avo.agent.heuristic.knobs import parse_knobs, point_of
    from avo.agent.heuristic.rules import Shape, fixed_roles, roles
    from avo.agent.heuristic.speed import estimate

    text = (SEED / "kernel.py").read_text()
    knobs = parse_knobs(text)
    shape = Shape(kind="gemm", roles=roles(knobs), fixed=fixed_roles(text, knobs))
    seed = point_of(knobs)
    guess = estimate(shape, seed, dict(seed, DESC_OFFSETS=True), None)
    assert guess.gain == 0 and guess.reason == "no rule predicts this one: measure it", guess


@needs.nvcc
def test_the_builds_holding_the_most_accumulators_compile_without_spills_finding_descriptors_by_offset(tmp_path):
    folder, gemm = offsets(tmp_path)
    g = gemm.__globals__
    # 160 and 128 fp32 accumulators a thread (the 320-wide tiles, 256 wide), and the 320-wide tiles' twins reading
    # an [N, K] B (128 x 128 in two sets compiles in the next test)
    builds = [g["_LARGE"][320], g["_SHORT"], g["_LARGE"][256]]
    flags = [b.module.build for b in builds] + [b.k_major().build for b in (g["_LARGE"][320], g["_SHORT"])]
    assert all("-DDESC_OFFSETS=1" in f.flags for f in flags)
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


# The 128 x 128 tile with two accumulator sets, where the profile found the instructions (256 x 8192 x 8192); the
# counts of every build are in BENCHMARKS.md
COMPARED = [(256, 8192, 8192)]


@needs.nvcc
def test_offsets_leave_fewer_instructions_between_a_steps_wgmma(tmp_path):
    """Each build compared compiles without spills, with or without the offsets."""
    folders = {"off": seed_with(tmp_path, {}, "off"), "on": offsets(tmp_path)}
    for m, n, k in COMPARED:
        counts = {}
        for name, (folder, gemm) in folders.items():
            build = gemm.__globals__["plan"](m, n, k, 132).build
            cubins = tmp_path / f"cubins-{name}-{m}"
            cubins.mkdir()
            resources = check_compiles_without_spills(folder, [build.module.build], cubin_dir=cubins)
            cubin = next(Path(f["cubin"]) for key, f in resources.items() if key.startswith("gemm_bf16"))
            counts[name] = _between_wgmma(cubin)
        assert 0 < counts["on"] < 0.8 * counts["off"], ((m, n, k), counts)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_descriptors_by_offset_give_the_same_bits_for_every_configuration(dtype, tmp_path):
    needs.module("cupy")
    on, off = offsets(tmp_path)[1], load_entry(SEED, "gemm")
    for m, n, k in SHAPES:
        check_repeatable(on, (m, n, k), dtype, (m, n, k), repeats=2)
        gen = torch.Generator(device="cuda").manual_seed(m + n + k)
        a = torch.randn((m, k), generator=gen, device="cuda", dtype=dtype)
        b = torch.randn((k, n), generator=gen, device="cuda", dtype=dtype)
        assert torch.equal(on(a, b), off(a, b)), f"{(m, n, k)}: other bits than descriptors made anew"
        weight = torch.randn((n, k), generator=gen, device="cuda", dtype=dtype)  # read as [N, K] in place
        assert torch.equal(on(a, weight.t()), off(a, weight.t())), f"{(m, n, k)}: [N, K] B, other bits"
    assert arrivals_reset(on), "arrival counters left set"
