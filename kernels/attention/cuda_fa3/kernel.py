"""Attention forward in CUDA C++ for Hopper, FlashAttention-3 style: TMA loads, warp-specialized wgmma for both
matmuls, P fed from registers, ping-pong between the consumer warpgroups, block j's softmax under block j-1's P V.
Causal or not, grouped-query heads, any S >= 1, head dim 64 or 128, bf16 or fp16.

attention.cu holds the kernel and says why it is fast (warpgroup.cuh: a consumer's matmuls and softmax); this
file picks a configuration per shape bucket (the table below), builds the TMA maps of q, k and v (3-D views
[B x H, S, D], boxes of BLOCK_M or BLOCK_N rows x 64 columns, 128-byte swizzle), sizes the grid in the order ORDER
names (one block per SM when the bucket's grid is persistent, else one per tile), and passes the tunables to the
compiler as -D defines (one build per configuration and dtype).
"""

import math
from typing import NamedTuple

import torch

from avo.cuda import KeptLaunches, capturing, current_stream, kept_zeros, load_module, tensor_map

# The shared configuration: every knob below serves every bucket that has no entry of its own for it, and BLOCK_N,
# PERSISTENT, BLOCK_M and CONSUMERS are those of the d128 bucket (D = 128 past MID_S: the bench suite's shapes from
# S = 8192, 1.03-1.06x cuDNN there, measured as BENCHMARKS.md says).
BLOCK_N = 192  # avo: tune 64 96 128 160 176 192
STAGES = 2  # avo: tune 2 3
PINGPONG = True  # avo: tune False True
OVERLAP = True  # avo: tune False True
ORDER = 1  # avo: tune 0 1 2
PERSISTENT = True  # avo: tune False True
# O through shared memory and a TMA store (attention.cu's O_TMA): 64 x D x 2 bytes of staging per consumer, which
# the d128 entry's 192-wide blocks leave no room for (226 KB of 227 without it). It pays where a tile is a few K/V
# blocks long and its store weighs: d128_short 0.826 -> 0.944 and d64_short 0.886 -> 0.905 in one sweep, and with
# 128-wide blocks at D = 128 up to S = 4096 (d128_mid); at D = 64 past SHORT_S it lost slightly (1.081 -> 1.063 at S
# 2048-4096), so d64 keeps the register store.
O_TMA = False  # avo: tune False True
# Two Q tiles in shared memory (attention.cu's Q_BUFFERS): a persistent block's producer loads the next tile's Q as
# soon as it has issued this tile's K and V, so the next tile's first Q Kᵀ does not wait for it. One more Q tile of
# shared memory (BLOCK_M x D x 2 bytes), which the d128 entry's 192-wide blocks leave no room for. On the H200
# (BENCHMARKS.md) it lifted d64_short 0.916 -> 0.947 (non-causal) and 0.903 -> 0.929 (causal), d128_short causal
# 0.907 -> 0.930, and cost D = 64's three consumers 3% (1.073 -> 1.038), so d64 keeps one.
Q_BUFFERS = 1  # avo: tune 1 2
# Grouped-query heads packed (non-causal only): the query heads that share a KV head are one run of G x S rows (q is
# [B, Hq, S, D] contiguous, so they lie end to end), cut into tiles as one head's rows would be. A 192-row tile then
# wastes no rows at each head's end (S = 512: 3 tiles of 192 for 512 rows, 11 for a group of four's 2048 rows
# instead of 12), and every tile's K and V serve all its rows. Causal masks depend on a row's place in its head, so
# causal calls run unpacked. On the H200 (BENCHMARKS.md), side by side: D = 64 with 32/8 heads, S = 512 0.946 ->
# 1.028x cuDNN, S = 1024 0.965 -> 1.051, S = 2048 1.069 -> 1.095, S = 4096 1.090 -> 1.114; from S = 8192, with no
# heads (16/16) to pack, and at D = 128, whose 128-row tiles end on every head's end, the same within 0.3%.
PACK_GQA = True  # avo: tune False True
# Causal tiles cut from a head's last row back (attention.cu's ALIGN_END), so that where BLOCK_M does not divide S
# the one partial tile is the head's lightest, not its heaviest: on D = 64's 192-row tiles at S = 2048 and 4096 the
# last tile's padding rows see every key, about 6% of the head's work. On the H200 (BENCHMARKS.md), D = 64's entry
# with it against without, side by side: causal S 2048-4096 0.985 -> 1.027x cuDNN, S >= 8192 1.111 -> 1.126, non-causal
# the same; so the d64 entry takes it. Off elsewhere: 128-row tiles end on the heads' end at the suites' S.
CAUSAL_ALIGN_END = False  # avo: tune False True
# Consumers whose 64 rows all lie past a head's last row (or before its first, with CAUSAL_ALIGN_END) issue no
# matmuls (attention.cu's SKIP_IDLE): at S = 1024 on 192-row tiles two of the last tile's three consumers hold only
# padding, and the third then has the tensor cores to itself. It loses, so off: on the H200 (BENCHMARKS.md) D = 64's
# entry with it ran 0.928 against 0.985 (causal S 2048-4096) and 1.021 against 1.134 (non-causal S >= 8192, where no
# consumer is ever idle). The likely cause, not verified: the second, idle copy of the tile loop (a larger hot
# instruction footprint). It costs d128's 192-wide build 48 bytes of spills (nvcc 13.0).
SKIP_IDLE = False  # avo: tune False True

BLOCK_M = 128  # query rows per block of the shared configuration: 64 per consumer (attention.cu: 64 * CONSUMERS)
CONSUMERS = 2  # its consumer warpgroups; a producer warpgroup comes on top

CAUSAL_PERSISTENT = False  # causal grids: one block per tile (the hardware balances the unequal tiles)
# Causal grids persistent and dynamic (attention.cu's DYNAMIC walk): one block per SM, each taking its next tile from
# an atomic counter, heaviest first head by head, as the hardware hands out blocks, but with no block start per tile
# and the next tile's Q and K loaded under this one's end. Takes precedence over CAUSAL_PERSISTENT's runs. On the
# H200 (BENCHMARKS.md), causal geomean over cuDNN, one block per tile or runs -> dynamic: D 128 S <= 1024 0.944 ->
# 1.025, S 2048-4096 0.981 -> 1.044, S >= 8192 1.064 -> 1.080; D 64 (three consumers) S 2048-4096 0.936 -> 0.988,
# S >= 8192 1.090 -> 1.109; D 64 S <= 1024 on two consumers 0.907 -> 0.903, so d64_short keeps its runs.
CAUSAL_DYNAMIC = True  # avo: tune False True
# A causal grid of runs (an entry's CAUSAL_PERSISTENT without CAUSAL_DYNAMIC) draws its tiles from the counter instead
# where a block's run would hold fewer tiles than a head has: a head's tiles are 1 to num_m blocks long, and runs even
# that out only when each spans a head's worth of them. D 64 short causal at batch 1 (Llama-3.2-1B's prefill, 32
# heads, S = 1024: 256 tiles, two per block) on the H200, in avo's evaluator: runs 0.913 -> counter 0.980 (and 0.944
# -> 0.987 in an earlier run); the wide suite's short causal cases (4096 tiles, 31 per block) keep their runs, which
# won there (0.910 against 0.903).
RUNS_NEED_WHOLE_HEADS = True  # avo: tune False True

# The other buckets' entries, each tuned from its own cases of the wide suite (bucket() below says which those are)
# with scripts/fa3_plan_sweep.py on the H200 (BENCHMARKS.md: geomean over cuDNN per bucket, entry against the shared
# configuration). An entry may also name its own STAGES (K/V stages in shared memory; at D = 128 three 128-wide
# stages fit only with one Q tile and no O staging, `fa3_plan_sweep.py --also 128:128:2:s3`), which none does yet:
SHORT_S = 1024
MID_S = 4096
TABLE = {
    # D = 128, S <= SHORT_S: a 128-wide K/V block fits S = 512 and 1024 in whole blocks (192 pads the last block of a
    # row by 12%) and ends a causal tile's diagonal on a block edge: 0.811 against 0.759; a persistent causal grid
    # of contiguous runs then lifts causal 0.774 to 0.806 (at S >= 2048 it loses: 0.70-0.83, the long tiles'
    # runs unequal); the shared CAUSAL_DYNAMIC, which takes precedence over the runs, does better still.
    "d128_short": dict(
        BLOCK_N=128,  # avo: tune 64 96 128 160 176 192 bucket=d128_short
        PERSISTENT=True,  # avo: tune False True bucket=d128_short
        CAUSAL_PERSISTENT=True,  # avo: tune False True bucket=d128_short
        O_TMA=True,  # avo: tune False True bucket=d128_short
        Q_BUFFERS=2,  # avo: tune 1 2 bucket=d128_short
    ),
    # D = 128, SHORT_S < S <= MID_S: 128-wide K/V blocks with O through TMA and two Q tiles, which the 192-wide
    # blocks leave no shared memory for: non-causal 0.959 -> 1.004, causal (one block per tile) 0.940 -> 0.991, and
    # at S = 4096 1.007 against 0.976 (BENCHMARKS.md). Runs of tiles (CAUSAL_PERSISTENT) lose here: 0.868; tiles
    # drawn from the counter (the shared CAUSAL_DYNAMIC) win: 1.044.
    "d128_mid": dict(
        BLOCK_N=128,  # avo: tune 64 96 128 160 176 192 bucket=d128_mid
        PERSISTENT=True,  # avo: tune False True bucket=d128_mid
        CAUSAL_PERSISTENT=False,  # avo: tune False True bucket=d128_mid
        O_TMA=True,  # avo: tune False True bucket=d128_mid
        Q_BUFFERS=2,  # avo: tune 1 2 bucket=d128_mid
    ),
    # D = 64: WARPGROUPS 3 gives three consumer warpgroups (192-row tiles), as FlashAttention-3 takes at D = 64: O is
    # half the size, so each of the three fits in 160 registers; 128 is the widest K/V block they hold without spills
    # (160 spills 208 bytes with nvcc 13.0). WARPGROUPS 2 is the shared 128-row configuration. Three with 128-wide
    # blocks: 1.061 against 0.913 (96-wide: 1.012; 1.09-1.14 from S = 8192).
    "d64": dict(
        BLOCK_N=128,  # avo: tune 64 96 128 160 176 192 bucket=d64
        WARPGROUPS=3,  # avo: tune 2 3 bucket=d64
        PERSISTENT=True,  # avo: tune False True bucket=d64
        O_TMA=False,  # avo: tune False True bucket=d64
        Q_BUFFERS=1,  # avo: tune 1 2 bucket=d64
        CAUSAL_ALIGN_END=True,  # avo: tune False True bucket=d64
    ),
    # D = 64, S <= SHORT_S, not causal: three consumers (192-row tiles) with O through TMA and two Q tiles, 0.952
    # against 0.914 for two consumers (BENCHMARKS.md). Without O_TMA and the second Q tile three consumers reached
    # 0.933; a causal grid of 192-row tiles loses (0.69-0.80), hence the causal entry below.
    "d64_short": dict(
        BLOCK_N=128,  # avo: tune 64 96 128 160 176 192 bucket=d64_short
        WARPGROUPS=3,  # avo: tune 2 3 bucket=d64_short
        PERSISTENT=True,  # avo: tune False True bucket=d64_short
        O_TMA=True,  # avo: tune False True bucket=d64_short
        Q_BUFFERS=2,  # avo: tune 1 2 bucket=d64_short
    ),
    # D = 64, S <= SHORT_S, causal: two consumers with 128-wide blocks and a persistent grid of contiguous runs:
    # 0.887 against 0.719 (causal 0.654 to 0.877); two Q tiles then 0.903 -> 0.929 in one sweep. Tiles drawn from
    # the counter (CAUSAL_DYNAMIC) did not pay here: 0.903 against 0.910 for the runs. Without ping-pong the two
    # consumers issue their matmuls as they come: 0.958 against 0.908 side by side (BENCHMARKS.md): tiles 1 to 8
    # blocks long leave little softmax to hide, and the token's hand-offs cost more than they hide.
    "d64_short_causal": dict(
        BLOCK_N=128,  # avo: tune 64 96 128 160 176 192 bucket=d64_short_causal
        WARPGROUPS=2,  # avo: tune 2 3 bucket=d64_short_causal
        CAUSAL_PERSISTENT=True,  # avo: tune False True bucket=d64_short_causal
        CAUSAL_DYNAMIC=False,  # avo: tune False True bucket=d64_short_causal
        O_TMA=True,  # avo: tune False True bucket=d64_short_causal
        Q_BUFFERS=2,  # avo: tune 1 2 bucket=d64_short_causal
        PINGPONG=False,  # avo: tune False True bucket=d64_short_causal
    ),
}


def bucket(B, Hq, Hkv, S, D, causal):
    """The entry a shape takes: by head dim, short and middle sequences apart, and at D = 64 short causal ones apart
    from the rest (avo's heuristic reads this rule too)."""
    if D == 64:
        if S > SHORT_S:
            return "d64"
        return "d64_short_causal" if causal else "d64_short"
    return "d128_short" if S <= SHORT_S else "d128_mid" if S <= MID_S else "d128"


_DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16"}
_SMEM_LIMIT = 227 * 1024
LOG2E = 1.0 / math.log(2.0)


class _Build:
    """One compiled configuration (head dim, K/V block width, consumer warpgroups, O's store, Q tiles, ping-pong,
    causal tiles aligned to the end, idle consumers skipped, K/V stages), one module per dtype."""

    def __init__(self, d: int, block_n: int, consumers: int, o_tma: bool = False, q_buffers: int = 1,
                 pingpong: bool = PINGPONG, align_end: bool = False, skip_idle: bool = False, stages: int = STAGES):
        self.d, self.block_n, self.consumers, self.o_tma, self.q_buffers = d, block_n, consumers, o_tma, q_buffers
        self.pingpong, self.align_end, self.skip_idle, self.stages = pingpong, align_end, skip_idle, stages
        self.block_m = 64 * consumers
        self.threads = 128 * (consumers + 1)
        # The Q tiles, STAGES K tiles and STAGES V tiles, O's staging (O_TMA), 1 KB to align them to the swizzle
        # atom, 1 KB for barriers.
        self.smem = (self.block_m * d * (q_buffers + (1 if o_tma else 0)) + 2 * stages * block_n * d) * 2 + 2048
        # O_TMA, Q_BUFFERS, ALIGN_END and SKIP_IDLE only where set: the other builds' flags (and so their cached
        # cubins) as before.
        self.modules = {dtype: load_module("attention.cu", defines={
            "BLOCK_N": block_n, "CONSUMERS": consumers, "STAGES": stages, "PINGPONG": pingpong, "OVERLAP": OVERLAP,
            "ORDER": ORDER, **({"O_TMA": 1} if o_tma else {}), **({"Q_BUFFERS": 2} if q_buffers == 2 else {}),
            **({"ALIGN_END": 1} if align_end else {}), **({"SKIP_IDLE": 1} if skip_idle else {}),
            "KERNEL_FP16": dtype == "fp16", "KERNEL_D": d,
        }) for dtype in _DTYPES.values()}


class Plan(NamedTuple):
    """What one bucket's shapes run: a build, whether a non-causal grid is persistent, and whether a causal one is,
    each block walking a contiguous run of tiles (attention.cu's SPAN) or drawing them from a counter (DYNAMIC)."""

    build: _Build
    persistent: bool
    causal_persistent: bool = False
    causal_dynamic: bool = False
    pack_gqa: bool = False


def _plans() -> dict[str, Plan]:
    """Every bucket's plan; each distinct build is declared once, here at import, so avo compiles them all ahead
    and in parallel."""
    builds: dict[tuple, _Build] = {}
    plans = {}
    for name, d in (("d128", 128), ("d128_short", 128), ("d128_mid", 128), ("d64", 64), ("d64_short", 64),
                    ("d64_short_causal", 64)):
        entry = TABLE.get(name, {})
        key = (d, entry.get("BLOCK_N", BLOCK_N), entry.get("WARPGROUPS", CONSUMERS), entry.get("O_TMA", O_TMA),
               entry.get("Q_BUFFERS", Q_BUFFERS), entry.get("PINGPONG", PINGPONG),
               entry.get("CAUSAL_ALIGN_END", CAUSAL_ALIGN_END), entry.get("SKIP_IDLE", SKIP_IDLE),
               entry.get("STAGES", STAGES))
        if key not in builds:
            builds[key] = _Build(*key)
        plans[name] = Plan(builds[key], entry.get("PERSISTENT", PERSISTENT),
                           entry.get("CAUSAL_PERSISTENT", CAUSAL_PERSISTENT),
                           entry.get("CAUSAL_DYNAMIC", CAUSAL_DYNAMIC), entry.get("PACK_GQA", PACK_GQA))
    return plans


PLANS = _plans()
_SMS: dict = {}
_COUNTERS: dict = {}
STRIDED, SPAN, DYNAMIC = 0, 1, 2  # attention.cu's WalkMode


def _counter(device):
    """The DYNAMIC walk's tile counter and count of finished blocks, zero between launches (the last block resets
    them): one pair per device and stream, since launches on two streams at once would draw each other's tiles. While
    a CUDA graph is captured, a pair of the call's own (the graph's memory, replayed with it), never kept."""
    if capturing():
        return torch.zeros(2, dtype=torch.int32, device=device)
    key = (device, torch.cuda.current_stream(device).cuda_stream)
    if key not in _COUNTERS:
        _COUNTERS[key] = kept_zeros(2, torch.int32, device)  # outside every torch memory pool
    return _COUNTERS[key]


def _sm_count(device) -> int:
    if device not in _SMS:
        _SMS[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SMS[device]


def plan(B: int, Hq: int, Hkv: int, S: int, D: int, causal: bool) -> Plan:
    return PLANS[bucket(B, Hq, Hkv, S, D, causal)]


def attention(q, k, v, causal, sm_scale):
    """q [B, Hq, S, D], k and v [B, Hkv, S, D] -> o [B, Hq, S, D] in q's dtype."""
    B, Hq, S, D = q.shape
    Hkv = k.shape[1]
    if D not in (64, 128):
        raise ValueError(f"head dim {D} is not supported: 64 or 128")
    if q.dtype not in _DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"q, k and v must all be bfloat16 or float16; got {q.dtype}, {k.dtype}, {v.dtype}")
    if Hq % Hkv or tuple(k.shape) != (B, Hkv, S, D) or tuple(v.shape) != (B, Hkv, S, D):
        raise ValueError(f"shapes q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} do not fit attention")
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty((B, Hq, S, D), dtype=q.dtype, device=q.device)
    # Everything the launch depends on: the addresses and shapes (the tensors are contiguous), the dtype, the
    # arguments and the stream (a DYNAMIC walk's counter is the stream's).
    key = (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), q.shape, Hkv, q.dtype, bool(causal),
           float(sm_scale), current_stream(q.get_device()))
    prepare = lambda: launcher(plan(B, Hq, Hkv, S, D, causal), q, k, v, o, causal, sm_scale)  # noqa: E731
    # A launch captured into a CUDA graph holds the graph's own counter: made for the capture, never kept.
    (prepare() if capturing() else _LAUNCHES.get(key, prepare))()
    return o


_LAUNCHES = KeptLaunches(64)
"""Calls' launches, prepared, by what they depend on (avo.cuda's KeptLaunches)."""

CUDA_GRAPHS = True
"""attention() may be captured into a CUDA graph (torch.cuda.graph): inside a capture the causal walk's counter is
the call's own and neither it nor the launch is kept for other calls, so a replay gives an eager call's bits
(tests/kernels/test_cuda_graphs.py). avo package runs such a kernel inside a capture, any other on the library. Under
torch.compile's reduce-overhead too: its warm-up calls allocate into the graph's pool, so the counter kept from one is
made by avo.cuda.kept_zeros, outside every torch pool."""


def launch(planned: Plan, q, k, v, o, causal, sm_scale):
    """Run one plan on contiguous q, k, v into o (contiguous, q's shape and dtype); returns o."""
    launcher(planned, q, k, v, o, causal, sm_scale)()
    return o


def launcher(planned: Plan, q, k, v, o, causal, sm_scale):
    """`launch`'s launch, prepared: avo.cuda's Launch, which queues the kernel each time it is called."""
    build = planned.build
    B, Hq, S, D = q.shape
    Hkv = k.shape[1]
    if build.d != D:
        raise ValueError(f"this build is for head dim {build.d}, not {D}")
    if build.smem > _SMEM_LIMIT:
        raise ValueError(f"BLOCK_N={build.block_n}, STAGES={build.stages} with {build.consumers} consumer warpgroups"
                         f"{' and O_TMA' if build.o_tma else ''}{' and Q_BUFFERS=2' if build.q_buffers == 2 else ''}"
                         f" need {build.smem} bytes of shared memory at D={D}: over {_SMEM_LIMIT}")
    group = Hq // Hkv
    packed = planned.pack_gqa and not causal and group > 1  # PACK_GQA: a KV head's query heads as one run of rows
    heads, rows = (Hkv, group * S) if packed else (Hq, S)
    map_q = tensor_map(q.view(B * heads, rows, D), box=(1, build.block_m, 64))
    map_k = tensor_map(k.view(B * Hkv, S, D), box=(1, build.block_n, 64))
    map_v = tensor_map(v.view(B * Hkv, S, D), box=(1, build.block_n, 64))
    map_o = tensor_map(o.view(B * heads, rows, D), box=(1, 64, 64)) if build.o_tma else map_v  # unread without O_TMA
    # Tiles of BLOCK_M query rows of one head. Causal tiles differ in length, and the hardware hands blocks to SMs
    # as they free up, which balances them better than a strided split; equal non-causal tiles gain from a
    # persistent grid, and causal ones may from a persistent grid of contiguous runs (SPAN) or of tiles drawn from a
    # counter as blocks free up (DYNAMIC).
    num_m, sms = -(-rows // build.block_m), _sm_count(q.device)
    tiles = num_m * B * heads
    dynamic = bool(causal) and (planned.causal_dynamic or (planned.causal_persistent and RUNS_NEED_WHOLE_HEADS
                                                          and tiles < num_m * sms))
    persistent = dynamic or (planned.causal_persistent if causal else planned.persistent)
    grid = min(tiles, sms) if persistent else tiles
    walk = DYNAMIC if dynamic else SPAN if causal and persistent else STRIDED
    counter = _counter(q.device) if dynamic else o  # unread unless DYNAMIC
    dtype = _DTYPES[q.dtype]
    return build.modules[dtype].launcher(
        f"attention_{dtype}_d{D}", grid, build.threads, (map_q, map_k, map_v, map_o, o, S, rows, heads,
                                                          1 if packed else group, B * heads, float(sm_scale) * LOG2E,
                                                          int(bool(causal)), walk, counter), shared_mem=build.smem)
