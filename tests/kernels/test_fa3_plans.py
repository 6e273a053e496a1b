"""attention/cuda_fa3's builds on a GPU: every build its per-shape table declares, and the three-consumer widths an
entry may name, against torch's SDPA in float32 (D 64 and 128, causal and not, S 1 to 2048, GQA 8/2, bf16 and fp16,
persistent grid and not, causal too, and causal tiles drawn from a counter, whose reset a later launch relies on,
grouped query heads packed into one run of rows or not), within the task's tolerance, and writing no row past S nor
before row 0, O stored from the registers or through shared memory by TMA (O_TMA), with one Q tile or two
(Q_BUFFERS: the next tile's Q loaded ahead, which a persistent grid's blocks reach), causal tiles aligned to the end
or not, and consumers holding only padding rows skipped or not.

Each build runs in a child process (this file run as a script) under a time limit, so a wrong barrier count or
register split fails as its own build's test instead of hanging the session. The CPU side of the table is
tests/kernels/test_fa3_plan_table.py."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from avo.evaluate.worker.loader import load_entry

SEED = Path(__file__).resolve().parents[2] / "kernels" / "attention" / "cuda_fa3"
SEQLENS = (1, 77, 128, 513, 1024, 2048)
B, HQ, HKV = 2, 8, 2
EXTRA = {(64, 64, 3, False, 1), (64, 128, 3, False, 1), (64, 192, 2, False, 1), (128, 128, 2, True, 1),
         (64, 128, 2, True, 1), (64, 128, 3, True, 1), (64, 96, 3, True, 1), (128, 128, 2, True, 2),
         (64, 128, 2, True, 2), (64, 128, 3, False, 2), (128, 128, 2, False, 2)}
"""Builds an entry may name that the defaults do not: the narrower three-consumer blocks, D = 64 on two consumers
with the shared BLOCK_N (the configuration D = 64 ran before the table), the short buckets' and D 64's builds with O
through TMA, and the builds with two Q tiles."""
NEWER = {(64, 128, 3, False, 1, True, True, False), (64, 128, 3, False, 1, True, False, True),
         (64, 128, 3, True, 2, True, True, True), (64, 128, 2, True, 2, False, True, True),
         (128, 128, 2, True, 2, True, True, True)}
"""Builds with causal tiles cut from each head's end (CAUSAL_ALIGN_END: a first tile that starts before row 0) or
with idle consumers skipped (SKIP_IDLE), or both: D 64's entry, D 64 short's (O through TMA, two Q tiles), D 64 short
causal's (no ping-pong) and D 128's short and middle ones. (d, BLOCK_N, consumers, O_TMA, Q tiles, ping-pong, aligned,
skipped)"""
LIMIT_S = 240
GRIDS = {"tiles": (False, False, False), "persistent": (True, True, False), "dynamic": (True, False, True),
         "packed": (True, False, True, True), "packed-tiles": (False, False, False, True)}
"""Plan(build, persistent, causal_persistent, causal_dynamic[, pack_gqa]) per grid: a block per tile; persistent
(causal: runs of tiles); persistent, causal tiles drawn from the counter; the same with a KV head's query heads
packed into one run of rows (non-causal calls; causal ones run unpacked), persistent and a block per tile."""
ROWS_PER_BUILD = 2 * len(SEQLENS) * 2 * len(GRIDS)  # dtypes x S x (non-causal, causal) x grids


def seed_builds() -> list[tuple[int, int, int, bool, int, bool, bool, bool]]:
    """(head dim, BLOCK_N, consumers, O_TMA, Q tiles, ping-pong, aligned to the end, idle consumers skipped) of every
    build the seed's table declares, the extra ones (with ping-pong) and the NEWER ones."""
    plans = load_entry(SEED, "attention").__globals__["PLANS"]
    return sorted({(p.build.d, p.build.block_n, p.build.consumers, p.build.o_tma, p.build.q_buffers, p.build.pingpong,
                    p.build.align_end, p.build.skip_idle) for p in plans.values()}
                  | {(*extra, True, False, False) for extra in EXTRA} | NEWER)


@pytest.mark.gpu
@pytest.mark.parametrize("d,block_n,consumers,o_tma,q_buffers,pingpong,align_end,skip_idle", seed_builds())
def test_build_matches_sdpa_and_writes_no_row_past_s(d, block_n, consumers, o_tma, q_buffers, pingpong, align_end,
                                                     skip_idle):
    import needs

    needs.module("cupy")
    try:
        done = subprocess.run([sys.executable, __file__, str(d), str(block_n), str(consumers), str(int(o_tma)),
                               str(q_buffers), str(int(pingpong)), str(int(align_end)), str(int(skip_idle))],
                              capture_output=True, text=True, timeout=LIMIT_S)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        pytest.fail(f"D={d} BLOCK_N={block_n} with {consumers} consumers did not finish in {LIMIT_S} s (a hang?); "
                    f"the last cases it finished:\n{out[-1500:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == ROWS_PER_BUILD, done.stdout[-2000:]
    bad = [r for r in rows if not (r["err"] <= r["tol"] and r["tail_untouched"])]
    assert not bad, f"{len(bad)} of {len(rows)} cases wrong: {bad[:6]}"
    assert "counters at zero" in done.stdout, done.stdout[-500:]


def check_build(d: int, block_n: int, consumers: int, o_tma: int, q_buffers: int, pingpong: int,
                align_end: int, skip_idle: int) -> None:
    """In the child: one row per case, printed as it finishes."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from avo.tasks import load, relative_error

    task = load("attention")
    module = load_entry(SEED, "attention").__globals__
    build = module["_Build"](d, block_n, consumers, bool(o_tma), q_buffers, bool(pingpong), bool(align_end),
                             bool(skip_idle))
    scale = 1 / math.sqrt(d)
    gen = torch.Generator(device="cuda").manual_seed(0)
    for dtype in (torch.bfloat16, torch.float16):
        for s in SEQLENS:
            q, k, v = (torch.randn((B, h, s, d), generator=gen, device="cuda", dtype=dtype) for h in (HQ, HKV, HKV))
            for causal in (False, True):
                with sdpa_kernel(SDPBackend.MATH):
                    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal,
                                                         scale=scale, enable_gqa=True)
                for grid, flags in GRIDS.items():
                    # NaN everywhere, and a margin as long as a tile before the first head and past the last: a
                    # row the kernel never writes reads back as NaN (an infinite error), a row past S of the last
                    # head lands in the tail, and one before row 0 of the first (a tile aligned to the end starts
                    # there) in the head margin.
                    size, margin = B * HQ * s * d, build.block_m * d
                    buf = torch.full((size + 2 * margin,), float("nan"), device="cuda", dtype=dtype)
                    o = buf[margin:margin + size].view(B, HQ, s, d)
                    module["launch"](module["Plan"](build, *flags), q, k, v, o, causal, scale)
                    torch.cuda.synchronize()
                    name = str(dtype).removeprefix("torch.")
                    print(json.dumps({"S": s, "causal": causal, "grid": grid, "dtype": name,
                                      "err": relative_error(o, ref), "tol": task.tolerance(name),
                                      "tail_untouched": bool(torch.isnan(buf[:margin]).all()
                                                             and torch.isnan(buf[margin + size:]).all())}),
                          flush=True)
    counters = [c.tolist() for c in module["_COUNTERS"].values()]
    assert counters and all(c == [0, 0] for c in counters), counters  # each DYNAMIC launch's last block reset them
    print("counters at zero")


if __name__ == "__main__":
    check_build(*map(int, sys.argv[1:9]))
