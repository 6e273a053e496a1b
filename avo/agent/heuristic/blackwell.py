"""What changes for the rule model on a B200 (sm_100a), each difference with its reason.

On Hopper a tile's fp32 accumulators live in registers for the whole K loop (wgmma writes registers). On Blackwell
tcgen05.mma writes them to tensor memory, 128 lanes by 512 columns of 32 bits per SM (PTX ISA, "Tensor Memory"), so
a new limit appears: the accumulators of one block must fit in those 512 columns. The register limit stays (255 per
thread, CUDA programming guide, compute capability 10.0) because Triton's epilogue, and attention's softmax, read
the accumulator tile back into registers with tcgen05.ld. Shared memory per block is Hopper's 227 KB (same table).
The starting points differ because one tcgen05.mma covers 128 rows and up to 256 columns (PTX ISA, tcgen05.mma
shapes for cta_group::1), where a wgmma covers 64 rows per warpgroup.
"""

from __future__ import annotations

TMEM_LANES = 128
TMEM_COLUMNS = 512
"""PTX ISA, tcgen05 Tensor Memory: 128 lanes x 512 columns of 32 bits per CTA (256 KB per SM)."""

PRESETS: dict[str, list[tuple[str, dict[str, int]]]] = {
    "gemm": [
        ("B200 start 128x256x64, 8 warps, 3 stages: one 128x256 tcgen05.mma per K step, 256 of the 512 tensor-memory "
         "columns (not yet measured on a B200)", {"bm": 128, "bn": 256, "bk": 64, "warps": 8, "stages": 3, "group": 8}),
        ("B200 start 128x128x64, 4 warps, 4 stages: the 4 warps' tcgen05.ld cover the 128 lanes once (not yet "
         "measured on a B200)", {"bm": 128, "bn": 128, "bk": 64, "warps": 4, "stages": 4, "group": 8}),
    ],
    "attention": [
        ("B200 start 128x128, 8 warps, 3 stages: S and O take 256 of the 512 tensor-memory columns at head_dim 128, "
         "the FlashAttention-4 tile (not yet measured on a B200)", {"bm": 128, "bn": 128, "warps": 8, "stages": 3}),
    ],
}
"""Known-good starting points on sm_100a, offered instead of Hopper's."""


def tmem_columns(kind: str, bm: int, bn: int, head_dim: int) -> int:
    """Tensor-memory columns one block's fp32 accumulators take: each 128 rows of the tile hold a 128-lane slab of
    N columns; attention keeps the score tile S (bn columns) and the output O (head_dim columns)."""
    width = bn + head_dim if kind == "attention" else bn
    return -(-bm // TMEM_LANES) * width


def tmem_problem(kind: str, bm: int, bn: int, head_dim: int) -> str | None:
    need = tmem_columns(kind, bm, bn, head_dim)
    if need > TMEM_COLUMNS:
        return f"needs {need} tensor-memory columns > {TMEM_COLUMNS} per SM (tcgen05 accumulators)"
    return None


def is_blackwell(arch: str) -> bool:
    return arch.startswith("sm_10")
