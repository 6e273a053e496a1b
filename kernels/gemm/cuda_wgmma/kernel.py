"""C = A @ B in CUDA C++ for Hopper: TMA loads, warp-specialized wgmma, a persistent tile loop, split-K where the
tiles are too few to fill the GPU, and a split tail where only their last wave would. bf16 (or fp16) in and out,
fp32 accumulation, any M, N, K >= 1.

gemm.cu holds the kernel and says why it is fast; this file picks a configuration per shape (the table below),
builds the TMA tensor maps of A and B (boxes of BLOCK_M x 64 and 64 x 64 elements, 128-byte swizzle, or B in 64 x 32
boxes in the 64-byte swizzle for the 96- and 160-wide tiles, 64 x 16 in the 32-byte one for 80 and 112; C's boxes of
64 x 64 for the TMA store), launches one block per SM (or per work unit, when there are fewer), and passes the
tunables to the compiler as -D defines. Shapes whose rows are not 16-byte aligned (K or N not a multiple of 8) go to
a simple kernel (simple.cu): TMA cannot address them.
"""

import math
from typing import NamedTuple

import torch

from avo.cuda import KeptLaunches, capturing, current_stream, kept_zeros, load_module, tensor_map

# The configuration is chosen per shape by plan() below, from a sweep of every tile and K split on the H200
# (scripts/gemm_config_sweep.py; figures in BENCHMARKS.md):
# 1. Few tokens (M <= FEW_ROWS): a 64-row tile, since a 128-row tile would spend half its tensor-core time on rows
#    of zeros, and such a GEMM is bound by reading B (the weights) once. 64 x 128 with six
#    stages read it fastest (0.95-1.03x cuBLAS unsplit, against 0.71-0.86x for 64 x 256 with four), even where it
#    left half the SMs idle.
#    Its entries are tuned from the few-token cases alone (bucket=few; bucket() below says which cases those are).
#    STREAM: where the tiles run to more than one wave, stream-K (rule 5) past the full waves, so that every SM
#    streams an equal share of B in the last one: 64 x 57344 x 8192 (448 tiles, 3.4 waves) 1.121 -> 1.157x cuBLAS on
#    the H200. Below one wave it lost (64 x 8192 x 8192: 0.901 -> 0.870): the blocks then read B at different K
#    offsets, where whole tiles read each K row of B across all its columns at once. STREAM_FROM: only past this many
#    waves of tiles. With two consumers and 7 stages it lost or tied everywhere it was timed (an H100, BENCHMARKS.md):
#    1.3 waves (128 x 11008 x 4096) 0.806 against 0.819x whole, 1.7 (128 x 14336 x 4096) 0.762 against 0.962,
#    3.4 (128 x 28672 x 8192) 0.871 against 0.913, 3.4 at 64 rows (64 x 57344 x 8192) 0.970 against 0.968; and past
#    four waves (128 x 57344 x 8192) 0.871 against 0.967, (128 x 37888 x 3584) 0.904 against 0.928: off.
#    NARROW: where the few-token GEMM's 64 x 64 tiles fill more than half the SMs in one wave, they run whole, one
#    per SM, NARROW_STAGES deep, in place of half as many 64 x 128 tiles that leave half the SMs idle (or split K
#    to fill them): side by side on the H200 (BENCHMARKS.md), 64 x 8192 x 8192 0.903 -> 0.960x cuBLAS (128 tiles),
#    64 x 8192 x 28672 0.990 (64 x 128 split in 2) -> 1.004; past one wave it lost (64 x 10240 x 8192, 160 tiles:
#    0.897 against 1.001). cuBLAS runs 64 x 64 tiles at 64 x 8192 x 8192 too (`avo profile --library`).
#    NARROW_SPLIT: where they fill half the SMs or fewer, the 64 x 64 tiles (split in K as rule 3 allows) where they
#    make more units than the 64 x 128 tiles (64 x 4096 x 4096: 64 tiles in 2 parts, 128 units, against 32 in 2;
#    64 x 2048 x 2048: 32 whole against 16). Over 22 shapes of 1 to 128 rows on an H100 (BENCHMARKS.md), 12 of them
#    moved: 64 x 2048 x 2048 0.678 -> 0.813x cuBLAS, 128 x 1024 x 4096 0.736 -> 0.857, 64 x 3584 x 3584 0.756 ->
#    0.814; none lost beyond the noise of these 8-20 us GEMMs (about 5% between two timings of one plan).
#    NARROW_WAVES: up to this many rows, past one wave, the 64 x 64 tiles where their waves, each half as long, end
#    sooner than the 64 x 128 tiles' (64 x 57344 x 8192: 7 waves of 896 against 4 of 448, 52 SMs busy in the last),
#    all whole (no stream-K). Side by side on an H100 (BENCHMARKS.md): at 64 rows 64 x 57344 x 8192 0.975 -> 0.996x
#    cuBLAS, 64 x 37888 x 3584 0.936 -> 0.971; at 128 rows mixed (128 x 12288 x 4096 0.891 -> 0.920, 128 x 11008 x
#    4096 0.831 -> 0.839, 128 x 28672 x 8192 0.889 -> 0.868), where two tile rows share B through L2 and the 64 x 64
#    tile's extra operand traffic per product weighs more: 64.
#    WG_SPLIT_K: two consumer warpgroups over the tile's 64 rows, taking alternate K-steps (gemm.cu), where one
#    waited on its own wgmma at every step; cuBLAS's 64 x 64 kernel has two consumers too. With it the 64-row tiles
#    pay up to 128 rows (FEW_ROWS; 64 with one consumer): side by side on the H200 (BENCHMARKS.md), over six 7-8B
#    layers at 128 rows 0.877x cuBLAS against 0.857 for the 128 x 128 tiles split in K (128 x 3584 x 3584 0.842
#    against 0.742, 128 x 4096 x 4096 0.874 against 0.811; lost at 128 x 6144 x 4096, 0.921 against 0.940, and
#    128 x 4096 x 14336, 0.881 against 0.935) and 0.807 for one consumer; at 64 rows level or ahead (64 x 4096 x 4096
#    0.728 against 0.700). Thread-block clusters of these tiles (2 x 4, as cuBLAS runs them) lost in this kernel:
#    0.765 against 0.842 at 128 x 3584 x 3584, and more where 8-block clusters outnumbered those that fit at once.
#    STAGES, NARROW_STAGES: with the fp32 hand-over buffer two consumers leave room for 7 stages of 64 x 128 and 12 of
#    64 x 64; such a GEMM waits on the latency of its loads (ncu: neither DRAM nor L2 near its limit), so a deeper
#    ring keeps more in flight: on an H100 (BENCHMARKS.md) 12 against 8 took 128 x 3584 x 3584 from 0.813 to 0.897x
#    cuBLAS and 128 x 4096 x 4096 from 0.855 to 0.951, 7 against 6 128 x 6144 x 4096 from 0.939 to 0.994. At 64 rows
#    the deeper rings lost a little where B streams near the HBM's rate (64 x 10240 x 8192: 0.945 against 0.981 for
#    6 stages; 64 x 8192 x 28672: 1.003 against 1.010 for 8). STAGES_M64, NARROW_STAGES_M64: the rings of the
#    same tiles at 64 rows or fewer, a build of their own where they differ. Six stages of 64 x 128 there (with 8 of
#    64 x 64): 0.913 against 0.906x cuBLAS for 7 and 12 over 13 shapes of 1 to 128 rows (64 x 10240 x 8192 0.979
#    against 0.944). The 64 x 64 tiles keep 12: over 14 shapes of 1 to 64 rows 0.924 against 0.910 for 8 and 0.919
#    for 10, 12 ahead where K is short or split (64 x 3584 x 3584 0.892 against 0.832), 8 ahead by 0.3-0.7% on the
#    wide suite's long-K shapes. NARROW_FULL_STAGES_M64: the ring of those 64 x 64 tiles from NARROW_FULL_FROM to 64
#    rows where they fill more than half the SMs, all whole (NARROW, NARROW_WAVES), bound by streaming B; the split
#    ones and the few whole ones (NARROW_SPLIT) keep NARROW_STAGES_M64. Side by side on an H100 (BENCHMARKS.md), 8
#    stages against 12 over 8 such shapes of 48 to 64 rows, two runs: 1.012 and 1.009x cuBLAS against 0.983 and 0.985
#    (48 x 6144 x 14336 1.023-1.034 against 0.933, 64 x 5120 x 8192 1.089-1.116 against 1.020-1.040); on 8 shapes of
#    33 to 64 rows not tuned on 0.989 against 0.965. At 32 rows or fewer they first lost (1 x 8192 x 8192 0.858
#    against 0.912), while TMA filled the 64-row box of A past M; with EDGE's 32-row box they won there too: over 15
#    shapes of 1 to 32 rows, two calls, 1.000 against 0.980 and 1.015 against 0.999 (8 x 6144 x 14336 1.008 against
#    0.971, 1 x 8192 x 28672 0.970 against 0.927; lost at 16 x 4608 x 14336, 1.023 against 1.052); over 14 shapes of
#    1 to 32 rows, 9 of them not tuned on, 0.985 against 0.974 (8 x 6144 x 14336 1.008 against 0.934). So 1: every
#    row count up to 64.
#    SPLIT_STEPS: the few-token tiles split K from parts of this many steps (rule 3's MIN_SPLIT_STEPS for the others):
#    32 tiles of 64 x 128 at 128 x 2048 x 8192 in 4 parts ran 0.940x against 0.677 whole on the H100.
#    CLUSTER_N: 2 runs these tiles in pairs along N (gemm.cu), each block loading half of the tile's rows of A and
#    multicasting them to both, so that A's tiles come from L2 once per pair; the plan then counts pairs (a pair
#    per two SMs). cuBLAS runs its 64 x 64 tiles so at 64 x 8192 x 8192 (`avo profile --library`, BENCHMARKS.md),
#    where it reads DRAM 3 points faster than these tiles do alone. Timed side by side on an H100 (BENCHMARKS.md),
#    the pairs lost at 11 shapes of 1 to 128 rows, 0.894 against 0.965x cuBLAS (64 x 8192 x 8192 0.968 against
#    0.991; 128 x 4096 x 4096 0.772 against 0.968), with or without WG_SPLIT_K: 1 (off).
#    EDGE: a tile row holding 32 rows of M or fewer (the only one at up to 32 rows; the second at 65 to 96) loads
#    one 32-row box of A (gemm.cu's EDGE_ROWS), where TMA's fill of the 64-row box's rows past M ran slow: with the
#    same 128 tiles of 64 x 64, 128 x 4096 x 8192 took 28.5 us, 96 rows 36.0 and 66 rows 45.4 (an H100). Side by side
#    (BENCHMARKS.md), over 13 shapes of 1 to 100 rows 0.972x cuBLAS against 0.875 for the whole box: 66 x 4096 x 8192
#    0.963 against 0.676, 96 x 4096 x 8192 1.090 against 0.834, 8 x 6144 x 14336 0.963 against 0.873; the shapes
#    with no such row (48 and 64 rows) as before.
#    WAVE_N: where the 64 x 128 tiles run one wave, unsplit, with SMs idle, and the 64 x 64 ones would run past one
#    wave, a tile this wide (80, 96 or 112: one wgmma, B in 16- or 32-column boxes, gemm.cu) whose tiles fill more of
#    the wave: 64 x 10240 x 8192 is 128 tiles of 64 x 80 (or 107 of 64 x 96, as cuBLAS runs it), against 80 of
#    64 x 128. Each SM then streams less of B. WAVE_STAGES deep. Side by side on an H100 (BENCHMARKS.md) they lost
#    at 8 of 9 such shapes of 1 to 64 rows: 64 x 10240 x 8192 1.057x cuBLAS for the plan's 80 tiles of 64 x 128,
#    1.015 for 107 of 64 x 96, 0.905 for 128 of 64 x 80, 0.712 for 92 of 64 x 112 (B's 16-column boxes, the
#    32-byte swizzle: slow to load); 64 x 96 won at 48 x 12288 x 4096 (128 tiles, 1.052 against 1.034) and lost
#    at 64 x 11008 x 4096 (115, 0.933 against 0.973). The H200 has not timed them: 0 (off), 96 the one to try.
FEW_ROWS = 128  # avo: tune 0 64 128
# FEW_LARGE_STEPS: past 64 rows the 128-row tiles split in K (rule 3) take a shape instead where they make at least
# as many work units as the few-token tiles, each at least FEW_LARGE_STEPS K-steps long: at equal parallelism a
# 128 x 128 tile reads half the operands per product, and long parts pay for their partials. 32 picks them at
# 128 x 6144 x 4096 and 128 x 4096 x 14336, where they won above, and at none of the other four; not yet timed on
# shapes it was not fitted to, so 0 (off).
FEW_LARGE_STEPS = 0  # avo: tune 0 32 64
# FEW_LARGE_WAVES: past 64 rows, where the few-token 64 x 128 tiles would run past one wave, the 128-row tiles' plan
# (rules 2 to 4) instead: two 64-row consumers then share each B tile in shared memory, where two 64-row tiles read it
# twice and run more waves. Side by side on an H100 (BENCHMARKS.md): 128 x 11008 x 4096 0.836 -> 0.923x cuBLAS,
# 128 x 28672 x 8192 0.887 -> 0.997, 128 x 57344 x 8192 0.967 (whole) -> 0.995, 100 x 37888 x 3584 0.929 -> 0.999,
# 128 x 14336 x 4096 0.965 -> 0.978; within one wave the 128-row tiles lost (128 x 4096 x 4096 0.803 against 0.986).
# Whole tiles only, as timed: at 128 x 10240 x 8192 the split tail's 40 tiles of 128 x 256 in 3 parts read 0.870
# against 0.988 for 80 whole tiles of 128 x 128.
FEW_LARGE_WAVES = True  # avo: tune False True
FEW = dict(
    # One wgmma's rows: fixed, and declared so that a search reads this entry's tile as it is (not BLOCK_M's 128).
    BLOCK_M=64,  # avo: tune 64 bucket=few
    BLOCK_N=128,  # avo: tune 128 256 bucket=few
    STAGES=7,  # avo: tune 4 5 6 7 bucket=few
    STAGES_M64=6,  # avo: tune 4 5 6 7 bucket=few
    STREAM=False,  # avo: tune False True bucket=few
    STREAM_FROM=4,  # avo: tune 1 2 3 4 bucket=few
    NARROW=True,  # avo: tune False True bucket=few
    NARROW_STAGES=12,  # avo: tune 6 8 10 12 bucket=few
    NARROW_STAGES_M64=12,  # avo: tune 6 8 10 12 bucket=few
    NARROW_FULL_STAGES_M64=8,  # avo: tune 6 8 10 12 bucket=few
    NARROW_FULL_FROM=1,  # avo: tune 1 17 33 49 65 bucket=few
    NARROW_SPLIT=True,  # avo: tune False True bucket=few
    NARROW_WAVES=64,  # avo: tune 0 64 128 bucket=few
    SPLIT_STEPS=32,  # avo: tune 16 32 64 128 bucket=few
    ACC_SETS=1,  # avo: tune 1 2 bucket=few
    WG_SPLIT_K=True,  # avo: tune False True bucket=few
    CLUSTER_N=1,  # avo: tune 1 2 bucket=few
    EDGE=True,  # avo: tune False True bucket=few
    WAVE_N=0,  # avo: tune 0 96 bucket=few
    WAVE_STAGES=8,  # avo: tune 6 8 bucket=few
)
# 2. Otherwise BLOCK_M rows, and of the widths BLOCK_N, 192 and 128 (FIT_WIDTHS) the one whose waves keep the most
#    SMs busy, each weighed by its throughput against the widest at equal fill (WIDTH_RATE: a narrower tile loads
#    more A per product). A 256-wide tile filling 61% of its one wave lost to a 192-wide filling 82% (0.78 vs
#    0.88x), and 48% to a 128-wide filling 97% (0.62 vs 0.94x); at equal fill the 256-wide won (1.00 vs 0.91x).
#    The rates are fitted to whole tiles of each width timed side by side on a 7B model's layers (4096 x 4608 x
#    3584, 4096 x 3584 x 3584, 1024 x 4608 x 3584 on the H200: 0.920-0.923 for 192, 0.877-0.885 for 128); at
#    0.97 and 0.93 the estimate sent 4096 x 3584 x 3584 to 128-wide whole tiles (0.947x cuBLAS), where the
#    256-wide with its last wave split in two ran 1.006x. With two accumulator sets since (ACC_SETS_128), whole
#    128-wide plans are weighed at RATE_128 0.93 (below), which sends that shape to them again: level on an H100
#    (1.014 against 1.012x), not yet timed on the H200. They are knobs: where a workload's shapes say otherwise,
#    an evolve can move them (and with them the choice of width wherever the estimate is close).
BLOCK_M = 128  # avo: tune 128 256
BLOCK_N = 256  # avo: tune 128 192 256
STAGES = 3  # avo: tune 2 3 4 5 6
# The narrower widths' own pipeline depths (where narrower than BLOCK_N): their stages are smaller, so more fit (a
# 192-wide tile has room for 4, a 128-wide for 6; each build takes what it asks for up to what fits). Deeper pays
# where a tile's K loop is short and its one wave starts cold: on a 1B model's layers (K = 2048) at 1024 rows, 4
# stages of the 192-wide tile read 0.968 against 0.921x cuBLAS at 3 side by side (1024 x 3072 x 2048 on the H200,
# an evolve's confirmation; 0.981 against 0.946 in a sweep); from 4096 rows no difference beyond the noise. At 256
# rows, where the 128-wide tile's one wave walks all of K = 8192 and is bound by streaming B, its sixth stage read
# 0.972 against 0.910x cuBLAS at 256 x 8192 x 8192 and 0.914 against 0.863 at 256 x 10240 x 8192 (the split tail),
# side by side on the H200 (BENCHMARKS.md); at 1024 x 2048 x 8192 a fifth read 0.918 and a sixth 0.914 against
# 0.899 at 4. (STAGES 4 to 6 on the 256-wide tile run with the 3 that fit; they once failed to launch.)
STAGES_192 = 3  # avo: tune 2 3 4
# EPILOGUE_SPLIT: the 256-, 192- and 128-wide tiles' C leaves in this many rounds per consumer, its 64 x 64 boxes
# staged a round at a time (gemm.cu's C_STAGED), as the 320-wide tile's do (STAGED_320), so that the staging buffer
# leaves room for another stage: in 2 rounds, 4 stages of the 256-wide tile fit (4 x 48 + 32 KB), where staged whole
# 3 do. Only where the rounds make room for a stage: each round after the first waits until TMA has read the last
# out of shared memory, 0.45 us more per tile of 128 x 128 in two (an H100's cycle counter, BENCHMARKS.md), so a
# width whose ring fits whole beside its C tile stages it whole. Not yet timed: 1 (the tile staged whole, as every
# figure above was measured).
EPILOGUE_SPLIT = 1  # avo: tune 1 2 4
STAGES_128 = 6  # avo: tune 3 4 5 6
# Accumulator sets of the 128-wide tile and of the few-token tiles (FEW["ACC_SETS"]): with two, a consumer's K-steps
# alternate between two register tiles, added at the end, so that one step's wgmma need not wait for the last's
# (gemm.cu's ACC_SETS). On the few-token tiles with one consumer (H200, BENCHMARKS.md) it read 0.865x cuBLAS over nine
# shapes of 64 and 128 rows, against 0.828 with one set and 0.880 with two consumers (WG_SPLIT_K), so it stays off
# there. On the 128-wide tile (two consumers, 6 stages, MMA_LAG at up to 256 rows) it is on: side by side on the H200
# over 11 shapes of 160 to 256 rows it won on every one, 0.934 -> 0.969-0.970 at 256 x 8192 x 8192, 0.953 -> 0.990-0.992
# at 256 x 3584 x 18944, 0.763 -> 0.794 at 160 x 8192 x 8192 (0.931 against 0.896 over nine); on an H100 two sets at
# 256 rows had read within the noise of one (BENCHMARKS.md).
ACC_SETS_128 = 2  # avo: tune 1 2
FIT_WIDTHS = True  # avo: tune False True
RATE_192 = 0.92  # avo: tune 0.88 0.92 0.97
# RATE_128 is the 128-wide tile's rate in a plan of whole tiles; RATE_128_SPLIT in a plan that splits them (a tail,
# split-K, stream-K). Both were 0.88, fitted with one accumulator set. With two (ACC_SETS_128), whole 128-wide plans
# ran 8-11% faster than that estimate, and split ones within 1-4% of it (H100, BENCHMARKS.md). At 0.93 for both, over
# 24 shapes it moved, the whole ones gained (384 x 14336 x 3584 0.928 -> 0.973 from 192-wide whole tiles,
# 200 x 7168 x 14336 0.840 -> 0.900 from 128 x 256 split in 2) and the 128-wide tails lost (1024 x 4608 x 18944
# 1.009 -> 0.963, 768 x 3584 x 28672 0.992 -> 0.954). So only whole plans take 0.93: on 20 shapes of 200 to 4096
# rows not tuned on, 0.948 -> 0.963x cuBLAS (768 x 8192 x 8192 0.959 -> 0.979, 256 x 4096 x 2048 0.747 -> 0.794;
# lost at 200 x 57344 x 3584, 0.957 -> 0.934, and by 0.4-1.6% at three shapes with K <= 3584).
RATE_128 = 0.93  # avo: tune 0.88 0.93 0.97
RATE_128_SPLIT = 0.88  # avo: tune 0.84 0.88 0.93
# A tile wider than one wgmma (320: 256 + 64 columns, two instructions per K-slice), weighed beside the others at
# RATE_320, where its waves divide a shape better: 1024 x 10240 x 8192 is 256 such tiles, under 2 waves on 132 SMs,
# where 256-wide tiles make 320 (2.4 waves); cuBLAS runs 128 x 320 there. Side by side on the H200 (BENCHMARKS.md):
# 1024 x 10240 x 8192 1.010-1.012x cuBLAS against 0.976 (256 wide, tail in 2); 512 x 10240 x 8192 1.011 against
# 0.924; 1024 x 4608 x 3584 0.992 against 0.873; 256 x 10240 x 8192 (64 tiles in 2 parts) 0.958 against 0.932. Where
# the estimate has it level or ahead by less than 2.5% it lost: 8192 x 14336 x 4096 0.990 against 1.013 (stream-K on
# 256-wide), 4096 x 10240 x 8192 0.986 against 0.997, 256 x 57344 x 8192 1.001 against 1.017; hence RATE_320 0.975.
# Its C tile is staged STAGED_320 boxes of 64 x 64 per consumer at a time, so that three stages fit beside it (staged
# whole, two stages: 0.905 against 1.012 at 1024 x 10240 x 8192). Not with clusters: B's five 64-column boxes do not
# split between two blocks.
WIDTH_320 = True  # avo: tune False True
STAGES_320 = 3  # avo: tune 2 3
STAGED_320 = 3  # avo: tune 1 2 3 5
RATE_320 = 0.975  # avo: tune 0.95 0.975 1.0
# A tile 160 wide (one wgmma of 160 columns; B in 32-column boxes, gemm.cu), weighed beside the others at RATE_160
# where 160 divides N into waves that fill the SMs: 256 x 10240 x 8192 is 128 tiles of 128 x 160, one wave, each
# walking all of K, where the 128 x 320 tiles are 64 and split in two (0.885-0.903x cuBLAS on the H200; cuBLAS runs
# 128 tiles of 64 x 320 there, as many products per block). Its C tile is stored from the registers (gemm.cu's
# TMA stores take 64 x 64 boxes), so six 36 KB stages would fit; STAGES_160 stays at 5, which the heuristic's
# shared-memory model (it counts a staged C tile for every width) accepts. ACC_SETS_160 accumulator sets, as
# ACC_SETS_128. Timed, it loses: 0.918 against the split plan's 0.995 at 256 x 10240 x 8192, 0.835 against 0.927
# over six shapes (H100, BENCHMARKS.md): off.
WIDTH_160 = False  # avo: tune False True
STAGES_160 = 5  # avo: tune 4 5
RATE_160 = 0.9  # avo: tune 0.85 0.9 0.95
ACC_SETS_160 = 1  # avo: tune 1 2
WIDTH_RATE = {320: RATE_320, 256: 1.0, 192: RATE_192, 160: RATE_160, 128: RATE_128}
SPLIT_RATE = {**WIDTH_RATE, 128: RATE_128_SPLIT}  # the same in a plan that splits the tiles (RATE_128_SPLIT)
# From FEW_ROWS to 256 rows, a 64-row tile SHORT_N wide may be weighed beside the 128-row ones (cuBLAS runs 64 x 320
# tiles at 256 x 10240 x 8192, 128 blocks in one wave, where 128-row tiles are 64 and split in K). With one consumer
# warpgroup it does not keep up: 0.867x cuBLAS there against 0.914 for the 128-wide tail, 0.713 against 0.970 at
# 256 x 8192 x 8192 (H200, BENCHMARKS.md). SHORT_WG_SPLIT_K: two consumers taking alternate K-steps, as the few-token
# tiles' WG_SPLIT_K, the second's sum handed over in SHORT_RED_ROUNDS rounds (gemm.cu's RED_ROUNDS: whole, its 80 KB
# would leave room for two stages) and C staged SHORT_STAGED boxes at a time, so that four 48 KB stages fit.
# So built it read 1.033 against the split plan's 0.988 at 256 x 10240 x 8192 and 1.113 against 1.064 at 200 rows
# (H100, BENCHMARKS.md), the one kind of work timed: one wave of whole tiles. With SHORT_N set it is weighed only
# there, where its tiles fill at least SHORT_FILL of one wave (split or past a wave it is untimed; SHORT_FILL 0
# weighs it anywhere), and where K is at least SHORT_MIN_K: each block's fixed cost (four stages to fill, the second
# consumer's sum to hand over, 64 x 320 to store) weighs on fewer K-steps. On an H100 over 19 such shapes it won 1-27%
# from K = 3072 (10 shapes), was even at 2048 (+1.5%, -0.5%) and lost 1-10% at K <= 1536 (7; BENCHMARKS.md).
# SHORT_ROWS: the rows up to which the short tile is weighed (256: the rows256 entry's shapes only). Past 256 rows
# the 128-row tiles leave up to half a tile row idle (320 rows: 3 tile rows, the last half empty), where 64-row tiles
# fill 5 rows. Weighed up to 384 rows, one wave of them took 15 of 16 shapes of 257 to 384 rows timed on an H100
# (BENCHMARKS.md), each ahead by 0.1-13%: 0.847 -> 0.904x cuBLAS over the 16 (320 x 8192 x 8192 0.787 -> 0.859,
# 257 x 8192 x 28672 0.764 -> 0.865, 320 x 7680 x 8192 0.788 -> 0.893): 384.
SHORT_N = 320  # avo: tune 0 320
SHORT_ROWS = 384  # avo: tune 256 384
SHORT_FILL = 0.9  # avo: tune 0.0 0.75 0.9
SHORT_MIN_K = 2048  # avo: tune 0 2048 4096
SHORT_STAGES = 4  # avo: tune 3 4
RATE_SHORT = 0.9  # avo: tune 0.8 0.9 1.0
SHORT_WG_SPLIT_K = True  # avo: tune False True
SHORT_RED_ROUNDS = 5  # avo: tune 1 2 5
SHORT_STAGED = 1  # avo: tune 1 3 5
GROUP_M = 8  # avo: tune 1 4 8 16
MMA_LAG = False  # avo: tune False True
TMA_STORE = True  # avo: tune False True
# 2b. From FEW_ROWS to 256 rows (bucket rows256) the 128-row tiles are one or two tile rows, and the GEMM is bound by
#     streaming B through the ring: that entry has its own depth for the widest tile (STAGES, room made by storing C in
#     EPILOGUE_SPLIT rounds) and keeps one step's products in flight behind the next (MMA_LAG) on every width whose ring
#     is 4 or more deep (with 3, the slot held for the products in flight leaves 2 loading). Side by side on an H100
#     (BENCHMARKS.md): 256 x 57344 x 8192 1.016 against 0.987x cuBLAS (4 stages, C in 2 rounds), 256 x 4096 x 14336
#     1.045 against 0.934 (the 128-wide tile's 6 with MMA_LAG), 256 x 8192 x 28672 0.996 against 0.986 (both); over 18
#     shapes of 160 to 256 rows, 14 of them not tuned on, 0.955 against 0.933. From 1024 rows the same 4 stages in
#     rounds lost 2-4% (4096 x 8192 x 8192, 8192 x 14336 x 4096), and MMA_LAG on the 3-stage 320-wide tile 2-5% at any
#     row count: the other entries keep the builds above. CLUSTER_N: 2 runs these tiles in pairs along N, sharing A as
#     the few-token tiles' CLUSTER_N does (cuBLAS runs 128 x 128 tiles in pairs at 256 x 8192 x 28672); side by side on
#     an H100 they lost at all 10 shapes timed, 0.839 against 0.969x cuBLAS (256 x 8192 x 28672 0.797 against 0.981;
#     BENCHMARKS.md): 1 (off). WAVE_FILL: where one of the entry's widths makes one wave of 128-row tiles at least this
#     full, it runs them whole, the fastest such width by rule 2's estimate, rather than split a wider tile in K or
#     split a tail (the short tile keeps its own rule, SHORT_FILL). The estimate charges a split part PARTIAL_STEPS and
#     nothing for the reduction's wait; at these rows one unsplit wave reads each B panel once and reduces nothing. Side
#     by side on an H100 (BENCHMARKS.md), over 15 shapes of 129 to 256 rows that it moves (N 8192 or 18944, K from
#     14336), 8 of them not tuned on: 0.920 -> 0.981x cuBLAS on those 8 (224 x 18944 x 28672 0.863 -> 0.982 with 120
#     tiles of 128 x 320, 256 x 8192 x 14336 0.931 -> 0.993 with 128 of 128 x 128), every one of the 15 ahead; the wide
#     suite's 256 x 8192 x 28672 0.976 -> 1.005-1.009. Taking the short tile too, it lost at 256 and 200 x 10240 x 28672
#     (1.007 -> 0.975, 1.030 -> 0.997), so it leaves that tile to its own rule: 0.9.
ROWS256 = dict(
    STAGES=4,  # avo: tune 3 4 bucket=rows256
    EPILOGUE_SPLIT=2,  # avo: tune 1 2 4 bucket=rows256
    MMA_LAG=True,  # avo: tune False True bucket=rows256
    CLUSTER_N=1,  # avo: tune 1 2 bucket=rows256
    WAVE_FILL=0.9,  # avo: tune 0.0 0.9 bucket=rows256
)
# 2c. From 257 to 1024 rows (bucket rows1024), WAVE_FILL as above, over the larger shapes' 128 x 128 tile only: where
#     its tiles make one wave at least this full, it runs them whole rather than split K or a tail. It moved 36 of
#     1152 enumerated shapes (320 to 1024 rows, N 2048 to 5120, K from 14336), each from 128 x 256 tiles split in 2;
#     since RATE_128 weighs whole 128-wide plans at 0.93 the estimate takes 24 of those itself, and the rule the
#     other 12 (K = 28672).
#     Side by side on an H100 (BENCHMARKS.md) it gained at all 17 such shapes timed, 2-8%; on the 8 timed after the
#     rule was set, 0.951 -> 1.002x cuBLAS (512 x 3584 x 14336 0.902 -> 0.973, 320 x 4608 x 14336 1.135 -> 1.232). The
#     wider tiles' one wave lost as often as it won (512 x 5120 x 14336 0.947 -> 0.882 on 108 of 128 x 192, 384 x
#     12288 x 14336 0.904 -> 0.938 on 117 of 128 x 320): not taken. At 0.8, 85% full waves (512 x 3584 x 18944 0.924
#     -> 0.975, 896 x 2048 x 18944 0.935 -> 0.982) are among them.
ROWS1024 = dict(
    WAVE_FILL=0.8,  # avo: tune 0.0 0.8 0.9 bucket=rows1024
)
# EDGE_ANY: a last tile row holding any part of a tile of M (not only half a tile or less, as gemm.cu's EDGE_ROWS
# does) loads only its rows of A, rounded up to 8, through a box of that many (gemm.cu's edge_rows): 200 rows on the
# 128-row tiles load 72 of the second tile row's 128, 48 rows on the 64-row tiles 48 of 64. TMA's fill past M ran
# slow wherever it was timed (BENCHMARKS.md: 66 x 4096 x 8192 0.676x cuBLAS with 62 of 64 rows filled, 0.963
# without). Fewer rows filled cost too: side by side on an H100 over 10 shapes of 33 to 3000 rows, 0.975 against
# 0.961 (33 x 8192 x 8192 1.002 against 0.975, 200 x 4096 x 14336 1.010 against 0.961, 100 x 3584 x 3584 0.898
# against 0.858; 224 x 28672 x 4096 0.939 against 0.945, within the noise of a second call). Not with pairs along N
# (CLUSTER_N).
EDGE_ANY = True  # avo: tune False True
# Blocks in pairs sharing B's tile by TMA multicast (gemm.cu): 0.997 against 1.005x cuBLAS over 16 shapes of 1024 to
# 16384 rows on the H200 (BENCHMARKS.md); it won only 16384 x 8192 x 28672 (1.066 against 1.049).
CLUSTER_M = 1  # avo: tune 1 2
# 3. Split-K, where the tiles leave half the SMs idle and K is long: each tile's K range cut into parts of at least
#    MIN_SPLIT_STEPS steps of 64, reduced in a fixed order (bitwise repeatable). It paid only there: 0.99 against
#    0.98x (64 x 8192 x 28672) and 0.97 against 0.63x (256 x 8192 x 28672 on 256-wide tiles); at K = 8192 or with
#    the SMs already filled, the partials' traffic cost more than the idle SMs.
MAX_SPLITS = 4  # avo: tune 1 2 4 8
MIN_SPLIT_STEPS = 128  # avo: tune 64 128 256
# 4. Otherwise, a split tail where the whole tiles' last wave would leave SMs idle: the full waves' tiles run whole
#    and only the last, partial wave's tiles are cut along K into up to TAIL_SPLITS parts (1 turns it off), reduced
#    as split-K is, so that wave's units fill the SMs. 1024 x 10240 x 8192 on 128 x 256 tiles is 320 tiles on 132
#    SMs: 264 whole in two waves, then 56 in 2 parts (112 units). plan() takes the option, of any width, with the
#    least estimated time (_time: waves x k-steps per unit, at WIDTH_RATE, plus partials), but a tail only where it
#    saves TAIL_GAIN of its width's whole-tile time: the bench suite's 8192 x 14336 x 4096 (27.2 waves) would save
#    an estimated 1.3%, below the estimate's error where measured (it put 128-wide tiles at 1.12x of 256-wide on
#    1024 x 10240 x 8192; they ran 1.06x, 0.926 against the old seed's 0.871 in one call). Not for the few-token
#    tile, bound by reading B rather than by its waves (64 x 57344 x 8192: 3.4 waves, 1.12x unsplit). The tail
#    itself is not timed yet: the estimates are 335 against 344 steps (1024 x 10240 x 8192: 256 wide with the tail,
#    against 128 wide whole) and 98.5 against 99.0 (256 x 10240 x 8192: 128 wide, 28 tiles in 4 parts, against 192
#    wide whole). Timed since (BENCHMARKS.md), a tail in two on 256-wide tiles read 0.969 against 0.939 for the
#    192-wide whole tiles at 4096 x 4608 x 3584, an estimated 4.6% saving: TAIL_GAIN is 4%.
TAIL_SPLITS = 4  # avo: tune 1 2 4 8
TAIL_GAIN = 0.04  # avo: tune 0.02 0.04 0.08
# 5. Stream-K where even a split tail leaves the last wave ragged: the tiles past the full waves (or past all but
#    up to STREAM_WAVES - 1 of them, so that the pieces are longer) have their K-steps dealt out in equal contiguous
#    runs, one per block, so every SM ends within a step of the others: 80 tiles of 128 steps (256 x 10240 x 8192)
#    are 77 or 78 steps per SM, where halves would take 64 + 64. A run meets two or three tiles, and each piece is
#    reduced as a split part is. plan() takes it, at any width and count of waves, where its estimate
#    (_stream_time) beats the best of the rules above by STREAM_GAIN, and only from STREAM_MIN_ROWS rows: timed on
#    the H200 (BENCHMARKS.md) it paid at M >= 8192 (8192^3 1.060 against 1.031 whole; 16384 x 8192 x 8192 1.075
#    against 1.026) and lost at every M <= 4096 (256 x 10240 x 8192 0.66 against 0.86 for the split tail). There
#    the blocks walk different K offsets at once, so the two tile rows that share a B panel no longer read it
#    together from L2: B, which such a GEMM is bound by reading, comes from DRAM twice. With STREAM_LANES > 1 the
#    tail is dealt by tile columns instead: up to STREAM_LANES tiles of a column (stream_lanes()) go to as many
#    blocks with one run between them, a row each, so the blocks sharing a B panel walk its K offsets together.
#    More lanes share more of B but leave the SMs past a multiple of them idle (8 lanes: 128 of 132 blocks).
#    STREAM_GAIN is how much faster than the rules above the estimate must put stream-K. At 0, from 1024 rows, on
#    an H100 (8 lanes; BENCHMARKS.md) it lost where the whole tiles leave a ragged last wave: 4096 x 8192 x 8192
#    (7.76 waves) 0.991 against 0.995x cuBLAS, 4096 x 8192 x 28672 0.964 against 1.000, 16384 x 57344 x 8192 0.970
#    against 0.988; 4096 x 57344 x 8192 1.022 against 1.012 and 4096 x 10240 x 8192 1.010 against 1.006.
STREAM_K = True  # avo: tune False True
STREAM_LANES = 8  # avo: tune 1 2 4 8
STREAM_MIN_ROWS = 8192  # avo: tune 1024 4096 8192 16384
STREAM_WAVES = 2  # avo: tune 1 2 3
STREAM_GAIN = 0.02  # avo: tune 0.0 0.02 0.05
MIN_RUN_STEPS = 8  # a run shorter than this would pay its partials for too little work
# The unit that finishes a split tile moves splits + 1 fp32 partials (its own out, every part back in for the
# sum), PARTIAL_STEPS k-steps each for a 128 x 256 tile, fitted to the one split measured at K = 8192: all 320 tiles
# of 1024 x 10240 in 2 parts ran 0.84x against 0.87x unsplit, 5 waves of 64-step units in the time of 398 steps
# where 3 waves of 128 took 384: 15.5 more per unit for 3 partials.
PARTIAL_STEPS = 5  # avo: tune 3 5 8
# KEEP_OWN: the unit that finishes a tile as its part 0 or 1 keeps its own part in registers (it is the sum's first
# or second term, and x + y is y + x bitwise) and reads only the others' back; where the tile's counter already says
# every other part is in, it writes none of its own (gemm.cu's reduce_splits). Off, every finishing unit writes its
# part and reads every part back, as PARTIAL_STEPS was fitted: 3 partials' traffic for a tile in 2 parts, against 1
# or 2. Timed, it loses: 5% at 256 and 200 x 10240 x 8192 in 2 parts (H100, BENCHMARKS.md): off.
KEEP_OWN = False  # avo: tune False True
# DESC_OFFSETS: a consumer makes its wgmma's shared-memory descriptors by adding each operand's offset (stage, rows,
# K-slice) to those of the ring's first tiles, where each is otherwise made anew from its address (gemm.cu): the
# same bits, found in fewer instructions. In nvcc 13.0's SASS, the instructions between one wgmma and the next of a
# step, over the kernel: 69 against 117 for the 128 x 128 tile in two sets (256 x 8192 x 8192's), 52 against 84 for
# 128 x 320, 26 against 41 for the few-token 64 x 128 (tests/kernels/test_gemm_desc_offsets.py, BENCHMARKS.md). At
# 256 x 8192 x 8192 the kernel's issue slots were busy 28% of the time against cuBLAS's 10%, its warps stalled on
# fixed-latency dependencies and dispatch (an H100's ncu). Timed with UNIFORM_WG on an H100 (BENCHMARKS.md), in one
# run: the wide suite 1.016x cuBLAS against 1.012x with both off, bench 1.018x against 1.009x; on.
DESC_OFFSETS = True  # avo: tune False True
# UNIFORM_WG: the warpgroup's index read as one value for all of a warp's lanes (gemm.cu), so that the compiler keeps
# the consumers' loop state and descriptors in uniform registers, which wgmma reads its descriptors from. With
# DESC_OFFSETS, 128 x 128's instructions between a step's wgmma go from 117 to 48 (BENCHMARKS.md). Of the two it
# gained more: 256 x 8192 x 28672 went 0.998x -> 1.005x with DESC_OFFSETS alone, 1.011x with this alone (H100): on.
UNIFORM_WG = True  # avo: tune False True
# DESC_WIDE: whether the 128 x 320 tile takes DESC_OFFSETS and UNIFORM_WG as well. Timed on an H100, it lost with
# them: 0.970x cuBLAS against 1.014x at 1024 x 10240 x 8192, 0.913x against 1.008x at 512 x 10240 x 8192, and more
# with either alone, where every other tile gained (BENCHMARKS.md): off.
DESC_WIDE = False  # avo: tune False True

SMEM_BYTES = 227 * 1024  # shared memory a block may opt in to on Hopper
BLOCK_K = 64  # one 128-byte swizzle row of 16-bit elements (fixed in gemm.cu)
CONSUMERS = 2  # wgmma warpgroups per block of the large tile (BLOCK_M / CONSUMERS rows each)
_KERNELS = {torch.bfloat16: "gemm_bf16", torch.float16: "gemm_fp16"}


class _Build:
    """One compiled configuration: tile shape, pipeline depth and consumer warpgroups."""

    def __init__(self, block_m: int, block_n: int, stages: int, consumers: int, cluster_m: int, staged: int = 0,
                 rate: float = 1.0, acc_sets: int = 1, wg_split_k: bool = False, lag: bool = MMA_LAG,
                 cluster_n: int = 1, edge: bool = True, red_rounds: int = 1, split_rate: float | None = None):
        self.block_m, self.block_n, self.consumers, self.cluster_m = block_m, block_n, consumers, cluster_m
        self.cluster_n, self.cluster = cluster_n, cluster_m * cluster_n  # blocks of a cluster: its rows x columns
        self.threads = 128 * (consumers + 1)  # a producer warpgroup on top of the consumers
        # With wg_split_k two consumers share the tile's rows and take alternate K-steps; one of them stores.
        self.storers = 1 if wg_split_k else consumers
        # with wg_split_k the second consumer's sum is handed over in red_rounds rounds (gemm.cu's RED_ROUNDS)
        red_rounds = red_rounds if wg_split_k else 1
        # B's boxes: 64 columns (or rows of an [N, K] B), or 32 where the width is no multiple of 64, or 16 where it
        # is no multiple of 32 (gemm.cu's B_COLS)
        self.b_cols = 64 if block_n % 64 == 0 else 32 if block_n % 32 == 0 else 16
        stages = self.fitting(block_m, block_n, stages, staged, self.storers, wg_split_k, red_rounds)
        self.smem = stages * self.stage_bytes(block_m, block_n) + self.fixed_bytes(block_m, block_n, staged,
                                                                                  self.storers, wg_split_k, red_rounds)
        self.defines = {
            "BLOCK_M": block_m, "BLOCK_N": block_n, "STAGES": stages, "GROUP_M": GROUP_M, "MMA_LAG": lag,
            "CONSUMERS": consumers, "TMA_STORE": self.tma_stores(block_n), "CLUSTER_M": cluster_m,
        }
        if cluster_n > 1:
            self.defines["CLUSTER_N"] = cluster_n
        self.edge = edge  # an edge row's A in one box of half the tile's rows (gemm.cu's EDGE_ROWS)
        self.edge_any = edge and EDGE_ANY and cluster_n == 1  # or of all its rows (EDGE_ANY)
        if not edge:
            self.defines["A_EDGE"] = 0
        if self.edge_any:
            self.defines["EDGE_ANY"] = 1
        if staged:
            self.defines["C_STAGED"] = staged
        if wg_split_k:
            self.defines["WG_SPLIT_K"] = 1
        if red_rounds > 1:
            self.defines["RED_ROUNDS"] = red_rounds
        if KEEP_OWN:
            self.defines["KEEP_OWN"] = 1
        descs = DESC_WIDE or (block_m, block_n) != (128, 320)
        if DESC_OFFSETS and descs:
            self.defines["DESC_OFFSETS"] = 1
        if UNIFORM_WG and descs:
            self.defines["UNIFORM_WG"] = 1
        if acc_sets > 1 and block_m // self.storers * block_n // 128 * acc_sets <= 160:  # room for the sets
            self.defines["ACC_SETS"] = acc_sets
        self.rate = rate  # its products per unit of time against a 128 x 256 tile's at equal fill (plan()'s estimate)
        # the same in a plan that splits its tiles (a tail, split-K, stream-K)
        self.split_rate = rate if split_rate is None else split_rate
        self.module = load_module("gemm.cu", defines=self.defines)
        self._k_major = None

    @staticmethod
    def tma_stores(block_n: int) -> bool:
        """Whether a tile this wide stores C through TMA (TMA_STORE): in 64 x 64 boxes, so not the 160-wide tile,
        which stores from the registers (gemm.cu)."""
        return TMA_STORE and block_n % 64 == 0

    @staticmethod
    def stage_bytes(block_m: int, block_n: int) -> int:
        return (block_m * BLOCK_K + BLOCK_K * block_n) * 2  # an A tile and a B tile

    @staticmethod
    def fixed_bytes(block_m: int, block_n: int, staged: int, storers: int, wg_split_k: bool = False,
                    red_rounds: int = 1) -> int:
        """Beside the ring: the C tile's staging buffer (TMA_STORE: every 64 x 64 box of it, or `staged` boxes per
        storing consumer at a time), with wg_split_k a round of the second consumer's fp32 sum (of `red_rounds`),
        1 KB to align the ring to the swizzle atom and 1 KB for barriers."""
        boxes = block_m * block_n // (64 * 64)
        staging = min(boxes, staged * storers or boxes) * 64 * 64 * 2 if _Build.tma_stores(block_n) else 0
        return staging + (block_m * block_n * 4 // red_rounds if wg_split_k else 0) + 2048

    @classmethod
    def fitting(cls, block_m: int, block_n: int, stages: int, staged: int, storers: int,
                wg_split_k: bool = False, red_rounds: int = 1) -> int:
        """As many of `stages` as fit in SMEM_BYTES beside the fixed part, at least 2 (a 256-wide tile has room for
        3 beside its whole C tile, a 192-wide for 4, a 128-wide for 6)."""
        room = SMEM_BYTES - cls.fixed_bytes(block_m, block_n, staged, storers, wg_split_k, red_rounds)
        return max(2, min(stages, room // cls.stage_bytes(block_m, block_n)))

    def edge_box(self, M: int) -> int:
        """The rows of A's box on the last tile row (gemm.cu's edge_rows), 0 where that row loads through map_a: M
        fills it, or holds more than EDGE_ROWS of it without EDGE_ANY, or the build has no edge rows, or runs in pairs
        along N (a pair's first block loads an edge row's rows as its share)."""
        left = M % self.block_m
        if not self.edge or self.cluster_n > 1 or not left or (left > self.block_m // 2 and not self.edge_any):
            return 0
        return -(-left // 8) * 8 if self.edge_any else self.block_m // 2

    def k_major(self):
        """The twin build that reads B as [N, K] rows (B_K_MAJOR), declared on first use: the evaluator passes a
        row-major b, so it never compiles this one."""
        if self._k_major is None:
            self._k_major = load_module("gemm.cu", defines={**self.defines, "B_K_MAJOR": 1})
        return self._k_major


if FEW["BLOCK_M"] != 64:
    raise ValueError(f"FEW['BLOCK_M'] is {FEW['BLOCK_M']}: the few-token tiles are 64 rows (one wgmma's)")


def _few_build(width: int, stages: int) -> _Build:
    return _Build(FEW["BLOCK_M"], width, stages, 2 if FEW["WG_SPLIT_K"] else 1, 1, acc_sets=FEW["ACC_SETS"],
                  wg_split_k=FEW["WG_SPLIT_K"], cluster_n=FEW["CLUSTER_N"], edge=FEW["EDGE"])


_FEW = _few_build(FEW["BLOCK_N"], FEW["STAGES"])
_NARROWS: dict = {}


def _narrow(stages: int) -> _Build | None:
    """The 64 x 64 tile's build `stages` deep (None where NARROW is off): one per depth, shared by the entries below."""
    if FEW["NARROW"] and stages not in _NARROWS:
        _NARROWS[stages] = _few_build(64, stages)
    return _NARROWS.get(stages)


_NARROW = _narrow(FEW["NARROW_STAGES"])
# At 64 rows or fewer: the same tiles with their own rings (the same build where the depths are equal).
_FEW_M64 = _FEW if FEW["STAGES_M64"] == FEW["STAGES"] else _few_build(FEW["BLOCK_N"], FEW["STAGES_M64"])
_NARROW_M64 = _narrow(FEW["NARROW_STAGES_M64"])
_NARROW_FULL_M64 = _narrow(FEW["NARROW_FULL_STAGES_M64"])
_WAVE = _few_build(FEW["WAVE_N"], FEW["WAVE_STAGES"]) if FEW["WAVE_N"] else None


def _rounds(width: int, split: int) -> int:
    """C_STAGED for a `width`-wide tile of two consumers: its boxes per consumer over `split` rounds (0: all at
    once)."""
    boxes = BLOCK_M // CONSUMERS * width // (64 * 64)
    return 0 if split <= 1 else max(1, boxes // split)


# The widest takes STAGES, a narrower one its own (STAGES_192, STAGES_128). With clusters each block of a cluster
# loads an equal share of a tile's 64-column boxes of B: a 192-wide tile has three, so two blocks cannot share it
# and that width is left out.
_WIDTHS = [BLOCK_N] + [n for n in (192, 128) if FIT_WIDTHS and n < BLOCK_N and n // 64 % CLUSTER_M == 0]
if FIT_WIDTHS and WIDTH_320 and CLUSTER_M == 1 and BLOCK_N != 320:
    _WIDTHS.insert(1, 320)
if FIT_WIDTHS and WIDTH_160 and CLUSTER_M == 1 and BLOCK_N > 160:  # five boxes of B: not shared by two blocks
    _WIDTHS.insert(_WIDTHS.index(128) if 128 in _WIDTHS else len(_WIDTHS), 160)
_BUILDS: dict = {}


def _large(width: int, widest_stages: int, split: int, lag: bool, lag_from: int = 0, cluster_n: int = 1) -> _Build:
    """The `width`-wide 128-row build: the widest takes `widest_stages`, a narrower one its own; C in `split` rounds
    (the 320-wide tile in STAGED_320 boxes); MMA_LAG `lag`, or with `lag_from` only where that many stages fit; in
    clusters of `cluster_n` along N. One build per distinct configuration, shared by the entries that ask for it."""
    stages = {192: STAGES_192, 160: STAGES_160, 128: STAGES_128, 320: STAGES_320}.get(width) \
        if width != BLOCK_N else widest_stages
    staged = STAGED_320 if width == 320 else _rounds(width, split)
    if width != 320 and _Build.fitting(BLOCK_M, width, stages, 0, CONSUMERS) >= \
            _Build.fitting(BLOCK_M, width, stages, staged, CONSUMERS):
        staged = 0  # rounds only where they make room for a stage: each after the first waits on the last's store
    acc_sets = {128: ACC_SETS_128, 160: ACC_SETS_160}.get(width, 1)
    args = (BLOCK_M, width, stages, CONSUMERS, CLUSTER_M, staged, WIDTH_RATE[width], acc_sets)
    if lag_from:
        lag = lag and _Build.fitting(BLOCK_M, width, stages, staged, CONSUMERS) >= lag_from
    if (args, lag, cluster_n) not in _BUILDS:
        _BUILDS[args, lag, cluster_n] = _Build(*args, lag=lag, cluster_n=cluster_n,
                                               split_rate=SPLIT_RATE[width])
    return _BUILDS[args, lag, cluster_n]


_LARGE = {n: _large(n, STAGES, EPILOGUE_SPLIT, MMA_LAG) for n in _WIDTHS}
_ROWS256 = {n: _large(n, ROWS256["STAGES"], ROWS256["EPILOGUE_SPLIT"], ROWS256["MMA_LAG"], lag_from=4,
                      cluster_n=ROWS256["CLUSTER_N"]) for n in _WIDTHS}


def short_build(width: int) -> _Build:
    """The 64-row tile `width` wide of 129 to 256 rows (SHORT_N): two consumers taking alternate K-steps
    (SHORT_WG_SPLIT_K) or one, C staged SHORT_STAGED boxes at a time."""
    return _Build(64, width, SHORT_STAGES, 2 if SHORT_WG_SPLIT_K else 1, 1, SHORT_STAGED, RATE_SHORT,
                  wg_split_k=SHORT_WG_SPLIT_K, red_rounds=SHORT_RED_ROUNDS)


_SHORT = short_build(SHORT_N) if SHORT_N else None
_SIMPLE = load_module("simple.cu")

_SMS: dict = {}
_PLANS: dict = {}
_WORKSPACE: dict = {}


def _sm_count(device) -> int:
    if device not in _SMS:
        _SMS[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SMS[device]


class Plan(NamedTuple):
    """One shape's work: `tiles` output tiles of `build` (units of a cluster's tiles, with clusters); the first
    `whole` run whole, each later one cut along K into `splits` parts (split-K: whole = 0), or with `stream` > 0
    dealt out stream-K to that many blocks, each tile in at most `splits` pieces."""

    build: _Build
    tiles: int
    whole: int
    splits: int
    stream: int = 0
    lanes: int = 1  # stream-K blocks per run: one per tile of a tile column (stream_lanes)

    @property
    def units(self) -> int:
        if self.stream:
            return self.whole + self.stream
        return self.whole + (self.tiles - self.whole) * self.splits


def _time(build: _Build, tiles: int, whole: int, splits: int, k_steps: int, sms: int) -> float:
    """Estimated time, in k-steps of a 128 x 256 tile: the waves of the whole tiles, then those of the split tiles'
    units, each at its width's throughput (in a plan that splits tiles, its split_rate: RATE_128_SPLIT), a split
    one also paying for its tile's partials (rule 4)."""
    size = build.block_m * build.block_n / (128 * 256)
    step = size / (build.rate if splits == 1 else build.split_rate)
    time = -(-whole // sms) * k_steps * step
    if splits > 1:
        unit = -(-k_steps // splits) * step + (splits + 1) * PARTIAL_STEPS * size
        time += -(-(tiles - whole) * splits // sms) * unit
    return time


def stream_lanes(rows: int) -> int:
    """The tiles of one tile column that stream-K deals to blocks sharing a run, at most STREAM_LANES: tile_coords
    walks a column's rows of a GROUP_M group one after another, so a divisor of every group's rows keeps each set
    of `lanes` consecutive tiles in one column."""
    shared = rows if rows <= GROUP_M else math.gcd(GROUP_M, rows)
    return max(d for d in range(1, min(shared, STREAM_LANES) + 1) if shared % d == 0)


def stream_runs(tiles: int, whole: int, k_steps: int, blocks: int,
                lanes: int = 1) -> list[list[tuple[int, int, int, int, int]]]:
    """Each stream-K block's pieces, (tile, k_begin, k_end, piece, pieces) of the tiles past `whole`, as gemm.cu's
    Schedule deals them: the blocks in groups of `lanes`, the tail's tiles in columns of `lanes`, group g's run
    steps [g W / groups, (g + 1) W / groups) of the W column-steps, column-major, each block on its lane's tile.
    (For the plan and the tests; the kernel computes its own from the same rule.)"""
    groups, total = blocks // lanes, (tiles - whole) // lanes * k_steps

    def holder(x: int) -> int:
        return ((x + 1) * groups - 1) // total

    runs = []
    for b in range(blocks):
        group, lane = divmod(b, lanes)
        begin, end = group * total // groups, (group + 1) * total // groups
        pieces = []
        for t in range(begin // k_steps, (end - 1) // k_steps + 1) if end > begin else ():
            start = t * k_steps
            first = holder(start)
            pieces.append((whole + t * lanes + lane, max(begin, start) - start, min(end, start + k_steps) - start,
                           group - first, holder(start + k_steps - 1) - first + 1))
        runs.append(pieces)
    return runs


def _stream_time(build: _Build, tiles: int, whole: int, k_steps: int, slots: int,
                 lanes: int = 1) -> tuple[float, int, int]:
    """(estimated time as _time counts it, blocks, most pieces of a tile) of stream-K past `whole` tiles: the whole
    tiles' waves, then the longest run, and the partials of the tile cut into the most pieces."""
    columns = (tiles - whole) // lanes
    groups = min(slots // lanes, columns * k_steps // MIN_RUN_STEPS)
    if groups * lanes < 2:
        return float("inf"), 0, 1
    blocks = groups * lanes
    pieces = max(piece[4] for run in stream_runs(tiles, whole, k_steps, blocks, lanes) for piece in run)
    size = build.block_m * build.block_n / (128 * 256)
    step = size / build.split_rate
    time = -(-whole // slots) * k_steps * step + -(-columns * k_steps // groups) * step
    return time + (pieces + 1) * PARTIAL_STEPS * size * (pieces > 1), blocks, pieces


def stream_plan(build: _Build, count: int, waves: int, k_steps: int, slots: int,
                rows: int = 1) -> tuple[float, Plan | None]:
    """Stream-K on `count` tiles of `build` (`rows` tile rows) past all but `waves` - 1 full waves: (estimated time,
    the plan), or (inf, None) where the runs would be shorter than MIN_RUN_STEPS."""
    lanes = stream_lanes(rows)
    whole = max(0, (count // slots - waves + 1) * slots) // lanes * lanes  # the tail in whole tile columns
    time, blocks, pieces = _stream_time(build, count, whole, k_steps, slots, lanes)
    return time, Plan(build, count, whole, pieces, blocks, lanes) if blocks else None


def _workspace(device, stream: int, partial_floats: int, counters: int):
    """fp32 partials and per-tile arrival counters (zero between calls: the last unit of a tile resets its own),
    grown as shapes need and kept: one pair per device and stream, since split calls on two streams at once would
    otherwise sum into each other's partials and count each other's arrivals. While a CUDA graph is captured, a pair
    of the call's own (the graph's memory, replayed with it), never kept."""
    if capturing():
        return (torch.empty(partial_floats, dtype=torch.float32, device=device),
                torch.zeros(counters, dtype=torch.int32, device=device))
    key = (device, stream)
    held = _WORKSPACE.get(key)
    if held is None or held[0].numel() < partial_floats or held[1].numel() < counters:
        floats = max(partial_floats, held[0].numel() if held else 0)
        count = max(counters, held[1].numel() if held else 0)
        held = kept_zeros(floats, torch.float32, device), kept_zeros(count, torch.int32, device)
        _WORKSPACE[key] = held
        _LAUNCHES.clear()  # the launches kept hold the replaced workspace's addresses
    return held


def bucket(M, N, K):
    """The entry a shape takes: the few-token tile, or the 128-row one, whose shapes fall in groups of rows (up to
    256, 1024, 4096, 16384, more) that share its configuration. avo's heuristic reads this rule and judges a move
    group by group: one that pays on a model's 4096-row layers and costs nothing elsewhere counts, even where it
    moves the geomean over every shape by less than the noise."""
    if M <= FEW_ROWS:
        return "few"
    if M <= 256:
        return "rows256"
    if M <= 1024:
        return "rows1024"
    if M <= 4096:
        return "rows4096"
    return "rows16384" if M <= 16384 else "rows_more"


def plan(M: int, N: int, K: int, sms: int) -> Plan:
    """The work for one shape: the five rules above, in order. Past 64 rows (FEW_ROWS 128) the 128-row tiles take
    the shapes whose few-token tiles would run past one wave (FEW_LARGE_WAVES: they stay in the few bucket, so that
    entry's knobs do not reach them), and split in K instead of the few-token tiles where FEW_LARGE_STEPS says so."""
    few = bucket(M, N, K) == "few"
    if few and M > 64 and FEW_LARGE_WAVES and -(-M // FEW["BLOCK_M"]) * -(-N // FEW["BLOCK_N"]) > sms:
        return _plan(M, N, K, sms, False, cut=False)
    chosen = _plan(M, N, K, sms, few)
    if few and M > 64 and FEW_LARGE_STEPS:
        large = _plan(M, N, K, sms, False)
        if large.splits > 1 and large.whole == 0 and large.units >= chosen.units and \
                -(-K // BLOCK_K) // large.splits >= FEW_LARGE_STEPS:
            return large
    return chosen


def _plan(M: int, N: int, K: int, sms: int, few: bool, cut: bool = True) -> Plan:
    """The rules above for the few-token tiles or the others; with `cut` False the latter's whole tiles only."""
    k_steps = -(-K // BLOCK_K)

    def tiles(build: _Build) -> int:  # blocks come in clusters, each taking cluster_m x cluster_n adjacent tiles
        return -(-M // (build.block_m * build.cluster_m)) * -(-N // (build.block_n * build.cluster_n))

    def whole_time(build: _Build) -> float:  # rule 2's fill of the waves and padding past N, at the width's rate
        return _time(build, tiles(build), tiles(build), 1, k_steps, sms // build.cluster)

    def one_wave(build: _Build, fill: float) -> bool:  # its tiles' blocks make one wave, at least `fill` of it
        return fill * sms <= tiles(build) * build.cluster <= sms

    # the widest among equals (first); up to 256 rows that entry's own builds (ROWS256); past the few-token rows and
    # up to SHORT_ROWS the short tile
    entry = bucket(M, N, K)
    rows256 = entry == "rows256"
    table = _ROWS256 if rows256 else _LARGE
    builds = list(table.values())
    if _SHORT is not None and FEW_ROWS < M <= SHORT_ROWS and K >= SHORT_MIN_K \
            and (not SHORT_FILL or one_wave(_SHORT, SHORT_FILL)):
        builds.append(_SHORT)  # one wave of them, whole, at least SHORT_FILL full, K long enough

    def k_parts(build: _Build) -> int:  # rule 3's split of K
        return max(1, min(MAX_SPLITS, sms // build.cluster // tiles(build),
                          k_steps // (FEW["SPLIT_STEPS"] if few else MIN_SPLIT_STEPS)))

    few_build, narrow = (_FEW_M64, _NARROW_M64) if M <= 64 else (_FEW, _NARROW)
    full = _NARROW_FULL_M64 if FEW["NARROW_FULL_FROM"] <= M <= 64 else narrow  # the whole ones' ring (NARROW_FULL_*)
    build = few_build if few else min(builds, key=whole_time)
    if not cut:
        return Plan(build, tiles(build), tiles(build), 1)
    fill = {"rows256": ROWS256, "rows1024": ROWS1024}.get(entry, {}).get("WAVE_FILL", 0)
    waves = [b for b in table.values()  # past 256 rows the 128-wide tile's only
             if one_wave(b, fill) and (rows256 or b.block_n == 128)] if fill else []
    if waves:  # WAVE_FILL: one wave of whole tiles, at least that full, of the fastest width that makes one
        build = min(waves, key=whole_time)
        return Plan(build, tiles(build), tiles(build), 1)
    if few and narrow is not None:  # rule 1's choices of the 64 x 64 tiles (in units of a cluster's tiles)
        count, slots = tiles(narrow), sms // narrow.cluster
        if slots // 2 < count <= slots:
            return Plan(full, count, count, 1)  # NARROW: one wave of them, whole
        elif FEW["NARROW_SPLIT"] and count <= slots // 2 and count * k_parts(narrow) > tiles(build) * k_parts(build):
            build = narrow  # NARROW_SPLIT: more units of them split in K
        elif M <= FEW["NARROW_WAVES"] and count > slots and -(-count // slots) < 2 * -(-tiles(build) // slots):
            return Plan(full, count, count, 1)  # NARROW_WAVES: more waves, half as long, all whole
    if few and _WAVE is not None and k_parts(build) == 1 and tiles(build) < tiles(_WAVE) and one_wave(_WAVE, 0) \
            and (narrow is None or not one_wave(narrow, 0)):
        return Plan(_WAVE, tiles(_WAVE), tiles(_WAVE), 1)  # WAVE_N: one wave of narrower tiles, filling more SMs
    units, splits = tiles(build), k_parts(build)
    if splits > 1:
        return Plan(build, units, 0, splits)
    slots = sms // build.cluster
    if few and STREAM_K and FEW["STREAM"] and units > slots * FEW["STREAM_FROM"] and units % slots:
        return stream_plan(build, units, 1, k_steps, slots)[1] or Plan(build, units, units, 1)
    best, fastest = Plan(build, units, units, 1), whole_time(build)
    for wide in () if few else builds:
        count, slots = tiles(wide), sms // wide.cluster
        whole = count // slots * slots  # the full waves' tiles
        for parts in range(2, min(TAIL_SPLITS, k_steps) + 1):
            time = _time(wide, count, whole, parts, k_steps, slots)
            if count > whole and time <= (1 - TAIL_GAIN) * whole_time(wide) and time < fastest:
                best, fastest = Plan(wide, count, whole, parts), time
    streamed, bound = best, (1 - STREAM_GAIN) * fastest
    for wide in () if few or not STREAM_K or M < STREAM_MIN_ROWS else _LARGE.values():
        count, slots = tiles(wide), sms // wide.cluster
        if count % slots == 0:  # every wave full: nothing to even out
            continue
        rows = -(-M // (wide.block_m * wide.cluster_m))
        for waves in range(1, min(STREAM_WAVES, count // slots + 1) + 1):
            time, candidate = stream_plan(wide, count, waves, k_steps, slots, rows)
            if candidate and time <= bound:
                streamed, bound = candidate, time
    return streamed


READS_TRANSPOSED_B = True
"""gemm() reads a b that is the transpose of a contiguous [N, K] tensor (nn.Linear's weight.t()) where it lies, with
no copy; avo package routes nn.Linear to such a kernel (checking its answer once per shape)."""
CUDA_GRAPHS = True
"""gemm() may be captured into a CUDA graph (torch.cuda.graph): inside a capture a split call's workspace is the
call's own and neither it nor the launch is kept for other calls, so a replay gives an eager call's bits
(tests/kernels/test_cuda_graphs.py). avo package runs such a kernel inside a capture, any other on the library. Under
torch.compile's reduce-overhead too: its warm-up calls allocate into the graph's pool, so the workspace kept from one
is made by avo.cuda.kept_zeros, outside every torch pool."""


_LAUNCHES = KeptLaunches(64)
"""Calls' launches, prepared, by what they depend on (avo.cuda's KeptLaunches); emptied when a workspace is
replaced."""


def gemm(a, b):
    """a [M, K] @ b [K, N] -> c [M, N] in a's dtype; b may be the transpose of a contiguous [N, K] tensor."""
    M, K = a.shape
    K2, N = b.shape
    if K != K2:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    if a.dtype != b.dtype or a.dtype not in _KERNELS:
        raise ValueError(f"a and b must both be bfloat16 or float16; got {a.dtype} and {b.dtype}")
    k_major = not b.is_contiguous() and b.t().is_contiguous()  # b's columns lie in memory as rows of K
    a, b = a.contiguous(), b if k_major else b.contiguous()
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if K % 8 or N % 8 or a.data_ptr() % 16 or b.data_ptr() % 16:
        b = b.contiguous()  # gemm_simple reads a row-major b
        name = "gemm_simple_" + _KERNELS[a.dtype].split("_")[1]
        _SIMPLE.launch(name, (-(-N // 128), min(M, 65535)), 128, (a, b, c, M, N, K))
        return c
    # Everything the launch depends on: the addresses and shapes (a and c are contiguous, b is or is read K-major),
    # the dtype and the stream (split calls' workspace is the stream's).
    key = (a.data_ptr(), b.data_ptr(), c.data_ptr(), M, N, K, k_major, a.dtype, current_stream(a.get_device()))
    prepare = lambda: _launcher(a, b, c, k_major)  # noqa: E731
    # A launch captured into a CUDA graph holds the graph's own workspace: made for the capture, never kept.
    (prepare() if capturing() else _LAUNCHES.get(key, prepare))()
    return c


def _workspace_size(planned: Plan) -> tuple[int, int]:
    """(fp32 partials, arrival counters) a split plan needs: a slot per storing consumer of each split tile, with
    room for `splits` parts or pieces of its rows (gemm.cu's slot numbering)."""
    build = planned.build
    slots = (planned.tiles - planned.whole) * build.cluster * build.storers
    return slots * planned.splits * (build.block_m // build.storers) * build.block_n, slots


def _launcher(a, b, c, k_major: bool):
    """One call's launch, prepared (avo.cuda's Launch): its plan, tensor maps and workspace."""
    (M, K), N = a.shape, b.shape[1]
    sms = _sm_count(a.device)
    planned = _PLANS.get((M, N, K, sms))
    if planned is None:
        planned = _PLANS[M, N, K, sms] = plan(M, N, K, sms)
    build, whole, splits = planned.build, planned.whole, planned.splits
    # With clusters along N each block loads its share of A's rows (gemm.cu's A_SHARE) for its cluster row.
    map_a = tensor_map(a, box=(build.block_m // build.cluster_n, BLOCK_K))
    # A's last tile row where it holds half a tile of rows or fewer (gemm.cu's EDGE_ROWS), or any part (EDGE_ANY)
    edge_box = build.edge_box(M)
    edge = tensor_map(a, box=(edge_box, BLOCK_K)) if edge_box else map_a
    # B in boxes of BLOCK_K x b_cols columns (the 64- or 32-byte swizzle for 32 or 16), or an [N, K] B in boxes of
    # b_cols of its rows by BLOCK_K, by the build's B_K_MAJOR twin.
    cols = build.b_cols
    map_b = tensor_map(b.t(), box=(cols, BLOCK_K)) if k_major else tensor_map(b, box=(BLOCK_K, cols), swizzle=2 * cols)
    module = build.k_major() if k_major else build.module
    map_c = tensor_map(c, box=(64, 64))
    partials, arrivals = c, c  # unread when unsplit
    if splits > 1:
        partials, arrivals = _workspace(a.device, current_stream(a.get_device()), *_workspace_size(planned))
    grid = min(planned.units, sms // build.cluster) * build.cluster
    return module.launcher(_KERNELS[a.dtype], grid, build.threads,
                           (map_a, edge, map_b, map_c, c, M, N, K, partials, arrivals, whole, splits, planned.stream,
                            planned.lanes), shared_mem=build.smem)
