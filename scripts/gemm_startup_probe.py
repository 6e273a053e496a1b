"""Where a gemm/cuda_wgmma block's time goes before its first load and after its main loop (needs a GPU to time).

    PYTHONPATH=$PWD python3 scripts/gemm_startup_probe.py --shapes 64x8192x8192,256x8192x8192
    python3 scripts/gemm_startup_probe.py --compile-only      # the instrumented copy, compiled for sm_90a (CPU)

A copy of the seed (in a temporary folder) has each block write `clock64` stamps, in cycles from its own start:
barriers initialised, the first unit worked out, its first load issued, all its first loads issued, the consumers'
registers held, first stage arrived, main loop done, the 64-row tile's hand-over done, C stored, C read out by TMA.
They go to a buffer the copy's kernel.py passes in place of the split tiles' arrival counters, so only plans without
a split are stamped. Each call follows the evaluator's L2 flush (not with `--no-flush`, which leaves the kernel's code
and operands in L2 from the call before) and launch shield (a 100 µs spin); the medians over
every block and `--calls` calls are printed per shape, with the plan's tile, and then the spread of the blocks'
"C read" stamps (lowest, 10th, 50th and 90th percentile, highest; each the median over the calls): with one wave
of blocks starting together, how long the last ones run past the rest. Then the SMs that ran the earliest-done tenth of
the blocks, with how many calls each did (an SM there call after call is fast by its place, not by its work). The
figures of BENCHMARKS.md's "first loads" section came from hand-made copies with these stamps.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.gemm_config_sweep import _shapes  # noqa: E402

SEED = ROOT / "kernels" / "gemm" / "cuda_wgmma"
STAMPS = {1: "barriers", 9: "first unit found", 10: "first load issued", 2: "first loads issued",
          3: "consumer regs", 4: "first stage in", 5: "loop done", 6: "hand-over", 7: "C stored", 8: "C read"}
STAMP = """    long long* stamps = reinterpret_cast<long long*>(arrivals) + blockIdx.x * 16;
    auto stamp = [&](int i) {
        long long t;
        asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) :: "memory");
        if (splits == 1) stamps[i] = t;
    };
    if (threadIdx.x == 0) {
        stamp(0);
        unsigned sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        if (splits == 1) stamps[15] = sm;  // which SM ran the block (not a time)
    }
"""
# (anchor in gemm.cu, what goes right after it); each anchor must occur exactly once
GEMM_PATCHES = [
    ("                                          int* arrivals, int whole, int splits, int stream, int lanes) {\n",
     STAMP),
    ("        mbar_fence_init();\n", "        stamp(1);\n"),
    ("        issued = min(STAGES, u.k_end - u.k_begin);\n", "        if (threadIdx.x == 0) stamp(9);\n"),
    ("        regs_alloc<CONSUMER_REGS>();\n", "        if (threadIdx.x == 128) stamp(3);\n"),
    ("                    mbar_wait(&full[stage], phase);\n                }\n",
     "                if (threadIdx.x == 128 && i == 0 && k == k_begin) stamp(4);\n"),
    ("            for (int s = 0; s < SUB_M; ++s) fence_regs(d[0][s]);\n",
     "            const bool last = threadIdx.x == 128 && i == work.count - 1;\n            if (last) stamp(5);\n"),
    ("                if (!hand_over(d[0], red, consumer, k_end - k_begin > 1, writes)) continue;"
     "  // the first finishes\n",
     "            if (last) stamp(6);\n"),
    ("                store_tile<FP16>(d[0], C, M, N, tm * BLOCK_M + rows * WG_M, tn * BLOCK_N);\n",
     "            if (last) stamp(7);\n"),
    ("        if (TMA_STORE && threadIdx.x % 128 == 0) tma_store_wait_read();"
     "  // the staging buffer outlives its stores\n",
     "        if (threadIdx.x == 128) stamp(8);\n"),
]
# (anchor, what replaces it): the first load's own stamp inside the loop that issues the first unit's loads, and
# the last's after it
GEMM_REWRITES = [
    ("            for (int s = 0; s < issued; ++s) fill(l, u.k_begin + s, s);\n",
     "            for (int s = 0; s < issued; ++s) {\n                fill(l, u.k_begin + s, s);\n"
     "                if (s == 0) stamp(10);\n            }\n            stamp(2);\n"),
]
KERNEL_PATCH = ("    partials, arrivals = c, c  # unread when unsplit\n",
                "    partials, arrivals = c, _stamps(a.device)  # unread when unsplit: the probe's stamps\n")
STAMPS_BUFFER = '''

_STAMP_BUFFER: dict = {}


def _stamps(device):
    """The probe's stamps: 16 per block."""
    if device not in _STAMP_BUFFER:
        _STAMP_BUFFER[device] = torch.zeros(1024 * 16, dtype=torch.int64, device=device)
    return _STAMP_BUFFER[device]
'''


def instrumented(folder: Path) -> Path:
    """A copy of the seed in `folder` whose blocks write their stamps; raises where gemm.cu moved on from the
    anchors (this script must then follow it)."""
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    source = (folder / "gemm.cu").read_text()
    for anchor, after in GEMM_PATCHES:
        if source.count(anchor) != 1:
            raise ValueError(f"gemm.cu holds {source.count(anchor)} of the anchor {anchor.strip()!r}")
        source = source.replace(anchor, anchor + after)
    for anchor, instead in GEMM_REWRITES:
        if source.count(anchor) != 1:
            raise ValueError(f"gemm.cu holds {source.count(anchor)} of the anchor {anchor.strip()!r}")
        source = source.replace(anchor, instead)
    (folder / "gemm.cu").write_text(source)
    kernel = (folder / "kernel.py").read_text()
    if kernel.count(KERNEL_PATCH[0]) != 1:
        raise ValueError("kernel.py no longer passes the arrival counters as the probe expects")
    (folder / "kernel.py").write_text(kernel.replace(*KERNEL_PATCH) + STAMPS_BUFFER)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", type=_shapes, help="MxNxK,...")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--no-flush", action="store_true", help="no L2 flush between calls")
    parser.add_argument("--compile-only", action="store_true", help="compile the copy's builds (no GPU)")
    args = parser.parse_args()
    from avo.cuda import declared_builds
    from avo.evaluate.cuda_compile import compile_check
    from avo.evaluate.worker.loader import load_entry

    folder = instrumented(Path(tempfile.mkdtemp()) / "stamped")
    gemm = load_entry(folder, "gemm")
    if args.compile_only:
        check = compile_check(folder, "sm_90a", builds=declared_builds(folder))
        bad = {k: v for k, v in check.resources.items()
               if v["spill_store_bytes"] or v["spill_load_bytes"] or v["wgmma_serialized"]}
        print("compiled" if check.ok and not bad else f"failed: {check.log[-2000:]} {bad}")
        sys.exit(0 if check.ok and not bad else 1)
    if not args.shapes:
        parser.error("--shapes is needed to time")
    import torch

    from avo.evaluate.worker.timing import L2Flush, LaunchShield
    from avo.gpus import resolve

    flush, shield = L2Flush(resolve("auto", "cuda").l2_mb << 20), LaunchShield(100.0)
    g = gemm.__globals__
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(torch.cuda.get_device_name())
    for case, m, n, k in args.shapes:
        a = torch.randn((m, k), device="cuda", dtype=torch.bfloat16)
        b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
        planned = g["plan"](m, n, k, sms)
        if planned.splits > 1:
            print(f"{case}: a split plan, not stamped")
            continue
        gemm(a, b)
        blocks = min(planned.units, sms // planned.build.cluster) * planned.build.cluster
        seen, stamps = {i: [] for i in STAMPS}, g["_stamps"](a.device)
        ends = []  # per call: the blocks' "C read" stamps, lowest to highest (the tail's spread)
        first = collections.Counter()  # how often each SM ran one of a call's earliest-done tenth of the blocks
        for _ in range(args.calls):
            stamps.zero_()
            if not args.no_flush:
                flush()
            shield()
            gemm(a, b)
            torch.cuda.synchronize()
            t = stamps[: blocks * 16].view(blocks, 16).cpu()
            for i in STAMPS:
                seen[i].extend(x for x in (t[:, i] - t[:, 0]).tolist() if x > 0)
            done = sorted((row[8] - row[0], row[15]) for row in t.tolist() if row[8] > 0)  # (C read, SM)
            ends.append([cycles for cycles, _ in done])
            first.update(sm for _, sm in done[:max(1, len(done) // 10)])
        tile = f"{planned.build.block_m}x{planned.build.block_n}"
        medians = "  ".join(f"{STAMPS[i]} {statistics.median_low(v)}" for i, v in seen.items() if v)
        print(f"{case} ({tile}), cycles from each block's start: {medians}", flush=True)
        ends = [e for e in ends if e]
        if ends:
            spread = "  ".join(f"{name} {statistics.median_low(e[int(q * (len(e) - 1))] for e in ends)}"
                               for name, q in (("min", 0), ("p10", 0.1), ("p50", 0.5), ("p90", 0.9), ("max", 1)))
            print(f"{case} C read across the blocks (medians over the calls): {spread}", flush=True)
            print(f"{case} SMs of the earliest-done tenth, by calls: "
                  f"{' '.join(f'{sm}:{n}' for sm, n in sorted(first.most_common(16)))}", flush=True)


if __name__ == "__main__":
    main()
