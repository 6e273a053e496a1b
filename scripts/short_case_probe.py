"""Why a short bench case reads low now and then: the evaluator's timing of one case, repeated, round by round.

For each repetition: the candidate's and the library's per-round medians (as the bench stage times them: the same
contenders, L2 flush, launch shield, input rotation), their ratio, and the host time of each call's wrapper (Python
clock around the call, outside the GPU's clock). The variants given with --shields (the configured shield in µs)
and --fits (timing.SHIELD_FIT: how far the shield grows to cover the contenders' launch work; 0 keeps it fixed)
alternate repetition by repetition, so drift hits each alike.

    python3 scripts/short_case_probe.py gemm kernels/gemm/cuda_wgmma --case 0 --reps 10 --shields 50,150 --fits 0
    python3 scripts/short_case_probe.py gemm kernels/gemm/cuda_wgmma --case 0 --reps 10 --shields 50 --fits 0,1.5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task")
    parser.add_argument("candidate", type=Path)
    parser.add_argument("--case", type=int, default=0)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--shields", default="50", help="launch shields in µs, alternating: e.g. 50,150")
    parser.add_argument("--fits", default="1.5", help="timing.SHIELD_FIT values, alternating: e.g. 0,1.5")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import torch

    from avo import tasks
    from avo.evaluate.worker.loader import load_entry
    from avo.evaluate.worker import timing
    from avo.evaluate.worker.timing import Contender, InputRotation, time_interleaved
    from avo.gpus import resolve

    task = tasks.load(args.task)
    case = task.cases("bench")[args.case]
    entry = load_entry(args.candidate.resolve(), task.entry)
    gpu = resolve("auto", "cuda")
    sources = [task.make_inputs(case, 1000 + k, "cuda") for k in range(3)]
    task.call(entry, sources[0])
    task.library(*sources[0])
    torch.cuda.synchronize()
    variants = [(float(s), float(f)) for s in args.shields.split(",") for f in args.fits.split(",")]
    rows = []
    for rep in range(args.reps):
        shield, timing.SHIELD_FIT = variants[rep % len(variants)]
        host: dict[str, list[float]] = {"candidate": [], "library": []}

        def clocked(name, fn):
            def run(a):
                t0 = time.perf_counter()
                out = fn(a)
                host[name].append((time.perf_counter() - t0) * 1e6)
                return out
            return run

        rotation = InputRotation(sources, seed=rep)
        contenders = [Contender("candidate", rotation, clocked("candidate", lambda a: task.call(entry, a))),
                      Contender("library", rotation, clocked("library", lambda a: task.library(*a)))]
        m = time_interleaved(contenders, device="cuda", l2_bytes=gpu.l2_mb << 20, warmup_ms=10, rep_ms=100,
                             shield_us=shield, rounds=5)
        cand, lib = m["candidate"], m["library"]
        ratios = [b / a for a, b in zip(cand.round_medians_ms, lib.round_medians_ms)]
        row = {"rep": rep, "shield_us": shield, "fit": timing.SHIELD_FIT, "shield_used_us": round(cand.shield_us, 1),
               "speedup": lib.ms / cand.ms,
               "round_ratio": [round(r, 4) for r in ratios],
               "cand_round_ms": [round(x, 4) for x in cand.round_medians_ms],
               "lib_round_ms": [round(x, 4) for x in lib.round_medians_ms],
               "cand_spread": round(cand.spread, 4), "lib_spread": round(lib.spread, 4),
               "cand_host_us": [round(statistics.median(host["candidate"]), 1),
                                round(sorted(host["candidate"])[int(0.9 * len(host["candidate"]))], 1),
                                round(max(host["candidate"]), 1)],
               "lib_host_us": [round(statistics.median(host["library"]), 1),
                               round(sorted(host["library"])[int(0.9 * len(host["library"]))], 1)],
               "cand_samples_q": [round(q, 4) for q in statistics.quantiles(cand.samples_ms, n=10)]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    for shield, fit in variants:
        s = [r["speedup"] for r in rows if (r["shield_us"], r["fit"]) == (shield, fit)]
        used = [r["shield_used_us"] for r in rows if (r["shield_us"], r["fit"]) == (shield, fit)]
        print(f"shield {shield:g} us, fit {fit:g} (used {min(used):g}-{max(used):g} us): speedup median "
              f"{statistics.median(s):.4f} min {min(s):.4f} max {max(s):.4f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
