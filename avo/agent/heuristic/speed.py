"""The speed model that ranks knob settings: what a kernel engineer knows about tile shapes on Hopper-class GPUs.

`modelled_speed(point)` is a product of factors, each one a well-known effect: operand reuse grows with the tile,
the fp32 accumulators must fit in registers, a deeper software pipeline hides global-load latency up to a point, a
wider K step feeds the tensor cores longer, grouped tile order reuses L2. The ratio of two points' modelled speeds is
the gain a move is expected to bring; profile facts (stalls, spills, memory-boundness) sharpen the estimate.
Absolute numbers mean nothing; only the order matters, which is what the search needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from avo.agent.heuristic.knobs import Point
from avo.agent.heuristic.rules import Facts, Shape, accumulator_registers, tile, width_stages


_FLAG_PRIORS = (("pack_gqa", 1.02), ("align_end", 1.02), ("skip_idle", 0.92), ("whole_heads", 1.02),
                ("overlap", 1.08), ("pingpong", 1.03), ("causal_dynamic", 1.03), ("o_tma", 1.03), ("stream_k", 1.02),
                ("tma_store", 1.06), ("mma_lag", 1.01), ("flatten", 1.01), ("tma", 1.08), ("desc_offsets", 1.0),
                ("desc_wide", 1.0), ("desc", 1.08), ("exp2", 1.05), ("persist", 1.04), ("mask_split", 1.04),
                ("warp_spec", 1.03), ("causal_split", 1.03), ("fma", 1.02), ("heavy_first", 1.02), ("split", 1.02),
                ("swizzle", 1.02))
"""Expected speed factor of a structural flag switched on, by a substring of its name (first match wins). "desc" reads
as a TMA descriptor's flag; gemm/cuda_wgmma's DESC_OFFSETS (wgmma's descriptors found by offset) and DESC_WIDE
(the same for its 128 x 320 tile) have none: with UNIFORM_WG it gained on every tile but that one, where it lost
(BENCHMARKS.md)."""
_FLAG_WHY = {  # first matching substring wins, so the longer names come first
    "pack_gqa": "the query heads of one KV head run as one sequence of rows: no partial tile at each head's end, "
                "and every tile's K and V serve all its rows (non-causal)",
    "align_end": "causal tiles cut from each head's end: the partial tile is the lightest, not the heaviest",
    "skip_idle": "consumers holding only padding rows issue no matmuls, leaving the tensor cores to the others",
    "whole_heads": "a causal grid of runs too short to even out its tiles' unequal lengths (fewer tiles per block "
                   "than a head has) draws them from a counter instead",
    "causal_dynamic": "causal tiles drawn from a counter, heaviest first, as blocks free up: no block start per "
                      "tile, and the next tile's loads run under this one's end",
    "o_tma": "O leaves through shared memory in whole 128-byte rows by a TMA store, and the warps go on to the next "
             "tile (weighs where tiles are a few K/V blocks long)",
    "stream_k": "the last partial wave's K-steps dealt out evenly over every SM, reduced in a fixed order",
    "tma_store": "the copy engine stores C from shared memory while the warps start the next tile's wgmma",
    "overlap": "block j's softmax runs while block j-1's P V is still on the tensor cores",
    "pingpong": "the two consumer warpgroups take turns on the tensor cores: one's softmax under the other's matmuls",
    "exp2": "one ex2 per score with log2(e) folded into the scale, instead of exp's extra multiply",
    "mask_split": "only the key blocks on the diagonal or the sequence end pay for masks",
    "causal_split": "only the key blocks on the diagonal pay for the causal mask",
    "heavy_first": "the causal query blocks with the most keys start first, the short ones fill the tail",
    "fma": "scaling the row maximum instead of every score fuses scale and subtract into one multiply-add",
    "tma": "tensor-memory-accelerator loads free the warps from address arithmetic",
    "persist": "persistent programs skip launch and tail effects",
    "mma_lag": "one stage's wgmma stays in flight while the next stage's is issued",
    "flatten": "the tile loop and the K loop become one, so loads run ahead across tile boundaries",
    "warp_spec": "producer warps issue the loads, consumer warps only the tensor-core work",
}


def modelled_speed(shape: Shape, point: Point) -> tuple[float, dict[str, float]]:
    """Relative speed of a point and its factors by name (for explaining a move)."""
    bm, bn, bk, warps, stages = tile(shape, point)
    factors: dict[str, float] = {}
    regs = accumulator_registers(shape, point)
    if shape.kind == "attention":
        factors["tile"] = _table({16: .5, 32: .65, 64: .82, 128: 1.0, 256: .88}, bm) * \
            _table({16: .7, 32: .85, 64: .97, 128: 1.0, 192: 1.02, 256: .9}, bn)
        # A producer warpgroup keeps a warp-specialized ring full from 2 stages on (3 measured 1-2% slower on the
        # H200); software-pipelined kernels want 3.
        pipeline = {1: .8, 2: 1.0, 3: .99, 4: .98} if "consumers" in shape.fixed else {1: .8, 2: .95, 3: 1.0, 4: .99,
                                                                                         5: .97}
        factors["pipeline"] = _table(pipeline, stages)
        if "order" in shape.roles:
            # 1: a head's query blocks together, heaviest first; 2: every head's heaviest first (K/V leave L2).
            factors["order"] = _table({0: .99, 1: 1.0, 2: .93}, shape.get(point, "order", 1))
        if "q_buffers" in shape.roles:
            # A second Q tile: the producer loads the next tile's Q as soon as this tile's K and V are issued
            # (measured on the H200: +1-3% where tiles are a few blocks long, -3% on D 64's three consumers).
            factors["q_prefetch"] = 1.02 if shape.get(point, "q_buffers", 1) >= 2 else 1.0
    else:
        intensity = bm * bn / (bm + bn)
        # wgmma's N extent reaches 256 while M is split across warpgroups: at equal area, wider N is cheaper.
        factors["tile"] = math.sqrt(min(intensity, 96.0) / 96.0) * (1.0 if bn >= bm else 0.99)
        pipeline = {1: .55, 2: .84, 3: .98, 4: 1.0, 5: .99, 6: .98}
        factors["pipeline"] = _table(pipeline, stages)
        for width, depth in width_stages(shape, point).items():  # a narrower width's own stages: in bytes in flight
            factors[f"pipeline {width}"] = _interpolated(pipeline, depth * (bm + width) / (bm + WIDEST))
        factors["k_step"] = _table({16: .8, 32: .93, 64: 1.0, 128: .97, 256: .9}, bk)
        if "group" in shape.roles:
            factors["l2_order"] = .95 if shape.get(point, "group", 1) <= 1 else 1.0
        if "cluster" in shape.roles:
            # Multicast shares one operand's loads between the blocks of a cluster; the blocks also wait for each
            # other's consumers before a slot is refilled. Measured on the H200 (gemm/cuda_wgmma, 16 shapes): 0.997
            # against 1.005x cuBLAS, so the prior is a small loss and measurement decides.
            factors["cluster"] = 1.0 if shape.get(point, "cluster", 1) <= 1 else .99
        if "lanes" in shape.roles:
            # Stream-K pieces of one tile column on as many blocks walking the same K offsets: they read each B
            # panel together, so B comes from DRAM once (one block per run: once per tile row).
            factors["lanes"] = _table({1: .97, 2: .99, 4: 1.0, 8: 1.0}, shape.get(point, "lanes", 1))
        if "epilogue_split" in shape.roles:
            # Slices cost a little extra store work; their gain is the shared memory they free (see infeasible).
            factors["epilogue"] = _table({1: 1.0, 2: .995, 4: .985}, shape.get(point, "epilogue_split", 1))
    # setmaxnreg gives a warp-specialized kernel's consumers 240 registers; others have about 128 for accumulators.
    roomy = shape.kind == "attention" and "consumers" in shape.fixed
    limit = 160 if roomy else 128
    factors["registers"] = 1.0 if regs <= limit else .9 if regs <= limit + 32 else .6
    big_tile = bm * bn >= 128 * 128 or (shape.kind == "attention" and bm >= 128)
    # Hopper's tensor-core instructions are issued by a warpgroup of 4 warps; big tiles want two of them.
    factors["warpgroups"] = (1.0 if warps >= 8 else .95) if big_tile else (1.0 if warps == 4 else .97)
    if warps < 4:
        factors["warpgroups"] *= .88
    if regs < 16:
        factors["registers"] *= .95
    for name, value in point.items():
        if isinstance(value, bool) and value:
            factors[f"flag {name}"] = next((f for key, f in _FLAG_PRIORS if key in name.lower()), 1.0)
    speed = math.prod(factors.values())
    return speed, factors


def _table(table: dict[int, float], value: int) -> float:
    if value in table:
        return table[value]
    keys = sorted(table)
    nearest = min(keys, key=lambda k: abs(math.log2(max(value, 1)) - math.log2(k)))
    return table[nearest] * 0.95


WIDEST = 256
"""The widest wgmma tile (N extent). A stage of a narrower tile (rules.width_stages) holds fewer bytes: its depth is
read as the stages of a tile this wide that hold as many bytes in flight (on the H200 the 192-wide tile paid at 4
stages, the 128-wide at 5, and its sixth read the same as its fifth: BENCHMARKS.md, 2026-12-04)."""


def _interpolated(table: dict[int, float], value: float) -> float:
    """The table read between its entries (linearly), and held at its ends."""
    keys = sorted(table)
    if value <= keys[0] or value >= keys[-1]:
        return table[keys[0] if value <= keys[0] else keys[-1]]
    low = max(k for k in keys if k <= value)
    high = min(k for k in keys if k >= value)
    if low == high:
        return table[low]
    return table[low] + (table[high] - table[low]) * (value - low) / (high - low)


@dataclass
class Estimate:
    gain: float
    """Expected relative change in fitness (0.1 = +10%)."""
    reason: str


def estimate(shape: Shape, old: Point, new: Point, facts: Facts | None) -> Estimate:
    """Expected gain of moving from `old` to `new`, and the one-line why."""
    s_old, f_old = modelled_speed(shape, old)
    s_new, f_new = modelled_speed(shape, new)
    for key in f_old.keys() ^ f_new.keys():  # a width only one of them reads narrower: no change of its pipeline
        if key.startswith("pipeline "):
            s_old, s_new = s_old / f_old.get(key, 1.0), s_new / f_new.get(key, 1.0)
    gain = s_new / s_old - 1.0
    changes = {k: (old.get(k), v) for k, v in new.items() if old.get(k) != v}
    reasons: list[str] = []
    facts = facts or Facts()
    stages_name = shape.roles.get("stages")
    tile_up = any(shape.roles.get(r) in changes and _up(changes[shape.roles[r]]) for r in ("bm", "bn"))
    if stages_name in changes and facts.long_scoreboard_pct is not None and facts.long_scoreboard_pct >= 15:
        weight = facts.long_scoreboard_pct / 100
        gain += weight * 0.25 if _up(changes[stages_name]) else -weight * 0.25
        reasons.append(f"long-scoreboard stalls {facts.long_scoreboard_pct:.0f}%")
    if tile_up and (facts.memory_bound or (facts.tensor_pipe_pct is not None and facts.tensor_pipe_pct < 40)):
        gain = gain * 1.5 + 0.03
        reasons.append(_memory_words(facts))
    relieves = accumulator_registers(shape, new) < accumulator_registers(shape, old)
    if relieves and (facts.spills or (facts.registers or 0) >= 224):
        gain += 0.1
        reasons.append(f"{facts.spills} B register spills" if facts.spills
                       else f"{facts.registers} registers per thread")
    reasons.append(_why(f_old, f_new, shape, old, new))
    return Estimate(gain=gain, reason="; ".join(r for r in reasons if r))


def _up(change: tuple) -> bool:
    before, after = change
    try:
        return float(after) > float(before)
    except (TypeError, ValueError):
        return bool(after) and not bool(before)


def _memory_words(facts: Facts) -> str:
    parts = []
    if facts.dram_pct is not None:
        parts.append(f"DRAM {facts.dram_pct:.0f}% of peak")
    if facts.tensor_pipe_pct is not None:
        parts.append(f"tensor pipe {facts.tensor_pipe_pct:.0f}%")
    return "memory-bound (" + ", ".join(parts) + ")" if parts else ""


def _width_why(width: int, shape: Shape, old: Point, new: Point) -> str:
    s0, s1 = width_stages(shape, old).get(width), width_stages(shape, new).get(width)
    return f"the {width}-wide tile's {s0} -> {s1} stages: " + \
        ("more loads in flight hide global-memory latency" if s1 > s0 else "less pipeline prologue")


def _why(f_old: dict[str, float], f_new: dict[str, float], shape: Shape, old: Point, new: Point) -> str:
    """The effect that moves the model most, in words with its numbers."""
    deltas = {k: f_new.get(k, 1.0) / f_old.get(k, 1.0) for k in set(f_old) | set(f_new)
              if not k.startswith("pipeline ") or k in f_old.keys() & f_new.keys()}  # a width both read narrower
    key, ratio = max(deltas.items(), key=lambda kv: (abs(math.log(kv[1])) if kv[1] > 0 else 0, kv[0]))
    if abs(ratio - 1.0) < 1e-9:
        return "no rule predicts this one: measure it"
    better = ratio > 1
    bm0, bn0, bk0, w0, s0 = tile(shape, old)
    bm1, bn1, bk1, w1, s1 = tile(shape, new)
    if key.startswith("flag "):
        name = key[5:]
        why = next((text for part, text in _FLAG_WHY.items() if part in name.lower()), "")
        return f"{name} {'on' if new.get(name) else 'off'}" + (f": {why}" if why and new.get(name) else "")
    if key == "tile":
        if shape.kind == "attention":
            return f"{bm0}x{bn0} -> {bm1}x{bn1} tile: {'fewer' if better else 'more'} K/V reloads per query row"
        i0, i1 = bm0 * bn0 / (bm0 + bn0), bm1 * bn1 / (bm1 + bn1)
        if abs(i1 - i0) < 0.5:
            return f"same operand reuse, {'wider' if bn1 > bn0 else 'narrower'} N for the tensor-core instruction"
        return f"{'more' if i1 > i0 else 'less'} operand reuse, {i0:.0f} -> {i1:.0f} MACs per loaded element"
    if key.startswith("pipeline "):  # a narrower tile width's own stages
        return _width_why(int(key.split()[1]), shape, old, new)
    if key == "pipeline":
        if s1 > s0:
            return "more loads in flight hide global-memory latency"
        return "frees shared memory" if not better else "less pipeline prologue and shared memory"
    if key == "k_step":
        return "longer tensor-core bursts between barriers" if better else "away from the usual 64-wide K step"
    if key == "registers":
        r0, r1 = accumulator_registers(shape, old), accumulator_registers(shape, new)
        return f"accumulators {r0:.0f} -> {r1:.0f} fp32 registers per thread" + (
            "" if r1 <= 128 else " (spills likely)")
    if key == "warpgroups":
        return f"{w1} warps for a {bm1}x{bn1} tile: " + (
            "one warpgroup per 64 rows of the tensor-core tile" if better else "mismatched to the tile")
    if key == "cluster":
        size = shape.get(new, "cluster", 1)
        return (f"clusters of {size}: TMA multicasts the shared operand into every block, less traffic from L2"
                if size > 1 else "no clusters: each block loads its own operands and waits for no partner")
    if key == "epilogue":
        return f"C stored in {shape.get(new, 'epilogue_split', 1)} slices: " + (
            "fewer, larger TMA stores" if better else "a smaller staging buffer frees shared memory for stages")
    if key == "order":
        value = shape.get(new, "order", 1)
        return {0: "query blocks of a head in ascending order", 1: "a head's query blocks together, heaviest "
                "first: its K and V stay in L2", 2: "every head's heaviest block first: better balance, but a wave "
                "spans many heads and K/V leave L2"}.get(value, f"tile order {value}")
    if key == "q_prefetch":
        return ("two Q tiles: the next tile's Q loads while this one finishes, so its first Q Kᵀ does not wait"
                if better else "one Q tile: frees a Q tile of shared memory (the next tile's Q loads at this "
                "one's end)")
    if key == "lanes":
        lanes = shape.get(new, "lanes", 1)
        return (f"stream-K runs shared by up to {lanes} blocks of a tile column: they read each B panel at the same "
                "K offsets, so B comes from DRAM once" if lanes > 1 else
                "one block per stream-K run: every SM busy, but tile rows read B at different K offsets")
    if key == "l2_order":
        return "grouped tile order reuses A and B in L2" if better else "plain row-major tile order"
    return key
