"""How a kernel's knobs read as tile shapes, and which points cannot run: which knob plays which role, the
shared memory a point's pipeline needs, the registers its accumulators hold, the profile facts the estimate uses
(the speed model that ranks the points is heuristic/speed.py; the B200's own limits are in heuristic/blackwell.py).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from avo.agent.heuristic import blackwell
from avo.agent.heuristic.knobs import Knob, Point, base_name

_ROLE_PATTERNS = {
    "bm": r"(block|tile)(_size)?_?(m|q)|bm",
    "bn": r"(block|tile)(_size)?_?(n|kv)|bn",
    "bk": r"(block|tile)(_size)?_?k|bk",
    "group": r"group(_size)?_?m",
    "warps": r"(num_)?warps",
    "stages": r"(num_)?stages",
    "head_dim": r"head_dim|block_d(model)?",
    "consumers": r"consumers|(consumer_|mma_)?warpgroups",
    "epilogue_split": r"epilogue_(split|subtiles?)",
    "cluster": r"cluster(_size)?(_m|_n)?",
    "order": r"(tile_)?order|schedule",
    "q_buffers": r"q_(buffers|stages)",
    "o_store": r"o_tma",
    "lanes": r"stream_lanes",
}
_WIDTH_STAGES = re.compile(r"stages_(\d+)")
_CONSTANT = re.compile(r"^([A-Za-z_]\w*)\s*=\s*(\d+)\s*(?:#.*)?$", re.M)

DEFAULT_SMEM_PER_BLOCK = 227 * 1024
BYTES_PER_ELEMENT = 2
"""bf16/fp16 operands, as both tasks use."""


@functools.lru_cache(maxsize=4096)
def role_of(name: str) -> str | None:
    base = base_name(name).lower()
    for role, pattern in _ROLE_PATTERNS.items():
        if re.fullmatch(pattern, base):
            return role
    return None


def fixed_roles(source: str, knobs: list[Knob]) -> dict[str, int]:
    """role -> value of the kernel's plain integer constants that play a role but are no knob (a CUDA seed's
    `BLOCK_K = 64` fixed by its swizzle, its `CONSUMERS = 2` warpgroups), so the model reads the kernel as it is."""
    tuned = {k.name for k in knobs}
    found: dict[str, int] = {}
    for name, value in _CONSTANT.findall(source):
        role = role_of(name)
        if role and name not in tuned and role not in found:
            found[role] = int(value)
    return found


def roles(knobs: list[Knob], bucket: str | None = None) -> dict[str, str]:
    """role -> knob name, for the first knob of each role: a bucket's own entries before the shared knobs when the
    bucket is named, else the shared knobs before any bucket's (a per-shape table's entry never stands for the
    whole kernel)."""
    found: dict[str, str] = {}
    # A consumer count of one entry would size every other entry's tile as well: the whole kernel keeps its own.
    knobs = [k for k in knobs if bucket or k.bucket is None or role_of(k.name) != "consumers"]
    for knob in sorted(knobs, key=lambda k: k.bucket != bucket if bucket else k.bucket is not None):
        role = role_of(knob.name)
        if role and role not in found:
            found[role] = knob.name
    return found


@dataclass
class Facts:
    """Measurements that sharpen the model; every field is optional (None: not measured)."""

    long_scoreboard_pct: float | None = None
    tensor_pipe_pct: float | None = None
    dram_pct: float | None = None
    compute_pct: float | None = None
    occupancy_pct: float | None = None
    registers: int | None = None
    spills: int | None = None
    sources: list[str] = field(default_factory=list)

    @property
    def memory_bound(self) -> bool:
        if self.dram_pct is None:
            return False
        return self.dram_pct >= 60 and (self.compute_pct is None or self.dram_pct > self.compute_pct)


@dataclass
class Shape:
    """How to read a point: which knob plays which role, for which task, on how much shared memory."""

    kind: str
    """'gemm' or 'attention' (anything else is modelled as gemm-like tiles)."""
    roles: dict[str, str]
    smem_limit: int = DEFAULT_SMEM_PER_BLOCK
    head_dim: int = 128
    fixed: dict[str, int] = field(default_factory=dict)
    """Roles the kernel sets with plain constants (see fixed_roles)."""
    arch: str = "sm_90a"
    """Compile target; on sm_100a the tensor-memory limit applies too (heuristic/blackwell.py says why)."""
    max_registers: int = 255
    smem_scale: float = 1.0
    """Bytes the compiler counts per byte of the model's (2-byte elements): set from a failure that says how much
    it required (search.Search.record); fp32 operands make it about 2."""

    def get(self, point: Point, role: str, default: int) -> int:
        name = self.roles.get(role)
        value = point.get(name) if name else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return self.fixed.get(role, default)
        return int(value)


def role_on(shape: Shape, point: Point, role: str) -> bool:
    """Whether the flag knob playing `role` (the bucket's own entry where the shape reads one) is on."""
    name = shape.roles.get(role)
    return bool(name and point.get(name) is True)


def tile(shape: Shape, point: Point) -> tuple[int, int, int, int, int]:
    """(block_m, block_n, block_k, warps, stages) with the usual Triton defaults for missing knobs. In a
    warp-specialized kernel the warps are those of its consumer (tensor-core) warpgroups."""
    warps = shape.get(point, "warps", 4)
    consumers = shape.get(point, "consumers", 0)
    bm = shape.get(point, "bm", 64)
    if consumers:
        warps = 4 * consumers
        if shape.kind == "attention" and "consumers" in shape.roles and "bm" not in shape.roles:
            bm = 64 * consumers  # a tuned count of consumer warpgroups, each wgmma's 64 rows: the tile follows it
    return (bm, shape.get(point, "bn", 64), shape.get(point, "bk", 32), warps, shape.get(point, "stages", 2))


def width_stages(shape: Shape, point: Point) -> dict[int, int]:
    """width -> pipeline depth of a GEMM kernel's tile widths narrower than its block_n that take their own (knobs
    named STAGES_<width>, as gemm/cuda_wgmma's STAGES_192 and STAGES_128: its plan picks a width per shape)."""
    found, widest = {}, shape.get(point, "bn", 64)
    for name, value in point.items():
        width = _stages_width(name)
        if width is not None and width < widest and isinstance(value, int) and not isinstance(value, bool):
            found[width] = value
    return found


@functools.lru_cache(maxsize=4096)
def _stages_width(name: str) -> int | None:
    """The width a STAGES_<width> knob names, else None (read once per name: a search asks for every point it
    ranks)."""
    match = _WIDTH_STAGES.fullmatch(base_name(name).lower())
    return int(match.group(1)) if match else None


def as_width(shape: Shape, point: Point, width: int, stages: int) -> Point:
    """The point read as its `width`-wide tile with that width's stages."""
    bn, depth = shape.roles.get("bn"), shape.roles.get("stages")
    return dict(point, **({bn: width} if bn else {}), **({depth: stages} if depth else {}))


def staging_elements(shape: Shape, point: Point) -> int:
    """Elements of the C tile staged in shared memory for a TMA store, which runs where a `tma_store` flag is on (or,
    in a kernel without such a flag, where it has an EPILOGUE_SPLIT knob): one of EPILOGUE_SPLIT slices, the whole
    tile without that knob; none otherwise."""
    flags = [v for k, v in point.items() if isinstance(v, bool) and "tma_store" in k.lower()]
    stores = any(flags) if flags else "epilogue_split" in shape.roles
    if shape.kind == "attention" or not stores:
        return 0
    bm, bn = shape.get(point, "bm", 64), shape.get(point, "bn", 64)
    return bm * bn // max(shape.get(point, "epilogue_split", 1), 1)


def smem_bytes(shape: Shape, point: Point) -> int:
    """Shared memory the software pipeline needs: one buffer of every streamed operand tile per stage."""
    bm, bn, bk, _, stages = tile(shape, point)
    d = shape.get(point, "head_dim", shape.head_dim)
    if shape.kind == "attention" and "consumers" in shape.fixed:
        # Warp-specialized (a producer fills a ring of K and V tiles on barriers): every stage is resident, as are
        # the Q tiles (a second one lets the next tile's Q load early) and O's staging for a TMA store.
        q_tiles = shape.get(point, "q_buffers", 1) + (1 if role_on(shape, point, "o_store") else 0)
        elements = bm * d * q_tiles + 2 * bn * d * stages
    elif shape.kind == "attention":
        # Q stays resident; K and V blocks are multi-buffered (the last stage overlaps the consumer).
        elements = bm * d + 2 * bn * d * max(stages - 1, 1)
    else:
        elements = (bm * bk + bk * bn) * stages + staging_elements(shape, point)
    return int(elements * BYTES_PER_ELEMENT * shape.smem_scale)


def accumulator_registers(shape: Shape, point: Point) -> float:
    """fp32 registers per thread held by the accumulators (and, for attention, the score tile)."""
    bm, bn, _, warps, _ = tile(shape, point)
    d = shape.get(point, "head_dim", shape.head_dim)
    per_block = bm * (d + bn) if shape.kind == "attention" else bm * bn
    return per_block / (32 * max(warps, 1))


def smem_failure(message: str) -> bool:
    """Whether a failed point's message says it ran out of shared memory (the search bounds shared memory then)."""
    text = (message or "").lower()
    return "shared memory" in text or "outofresources" in text or "out of resource" in text


def infeasible(shape: Shape, point: Point, smem_cap: int | None = None) -> str | None:
    """Why a point cannot run well at all (it would not compile, or would spill its accumulators), or None."""
    limit = min(shape.smem_limit, smem_cap) if smem_cap else shape.smem_limit
    need = smem_bytes(shape, point)
    if need > limit:
        return f"needs {need // 1024} KB shared memory > {limit // 1024} KB per block"
    for width, stages in width_stages(shape, point).items() if shape.kind == "gemm" else ():
        need = smem_bytes(shape, as_width(shape, point, width, stages))
        if need > limit:
            return f"the {width}-wide tile's {stages} stages need {need // 1024} KB shared memory > {limit // 1024} KB"
    regs = accumulator_registers(shape, point)
    if regs > shape.max_registers + 1:
        return f"{regs:.0f} accumulator registers per thread > {shape.max_registers}"
    if blackwell.is_blackwell(shape.arch):
        bm, bn, _, _, _ = tile(shape, point)
        return blackwell.tmem_problem(shape.kind, bm, bn, shape.get(point, "head_dim", shape.head_dim))
    return None
