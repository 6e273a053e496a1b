"""attention/cuda_fa3's per-shape plan beside other configurations (--also; --single: the one it ran before the table),
on a GPU: every case of a suite (the wide one by default) timed as the evaluator's bench stage times it
(time_as_configured: the library and each configuration interleaved call by call, L2 flushed, launch shield, input
rotation, EvalConfig's defaults), each output first checked against the library's. Prints one line per case, then per
bucket (head dim x causal x S range, and the table's own buckets) the geometric mean of the speedups over cuDNN, min
and max, per configuration.

    python scripts/fa3_plan_sweep.py --single                       # the plan and the single configuration
    python scripts/fa3_plan_sweep.py --also 64:96:3 64:128:2 128:128:2 --json sweep.json

--also D:BLOCK_N:CONSUMERS[:nopersist][:span][:dyn][:otma][:q2][:nopp][:end][:skip][:s3] times further
configurations on the cases of head dim D (span: causal grids persistent too, each block a contiguous run of tiles;
dyn: causal grids persistent, each block drawing its next tile from a counter; otma: O stored through shared memory
by TMA; q2: two Q tiles, the next tile's Q loaded ahead; nopp: no ping-pong between the consumers; end: causal tiles
cut from each head's last row back, ALIGN_END; skip: consumers holding only padding rows issue no matmul, SKIP_IDLE;
s3: three K/V stages instead of two), grouped query heads packed as the seed's PACK_GQA says. --min-s and --max-s
time only the cases of S in that range, --d only those of that head dim, --causal only the causal ones. --against
DIR times another folder's plan beside this one's (a knob variant of it, scripts/knob_variant.py), interleaved in the
same process.
Exits 1 if any output was wrong.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SEED = ROOT / "kernels" / "attention" / "cuda_fa3"
SINGLE = (192, 2, True, False)
"""BLOCK_N, consumer warpgroups, persistent grid (non-causal, causal) of the single configuration before the table."""
LIBRARY = "library"


FLAGS = ("nopersist", "span", "dyn", "otma", "q2", "nopp", "end", "skip", "s3")


def parse_config(text: str) -> tuple[str, tuple]:
    """(its name, (D, BLOCK_N, consumers, persistent, span, dynamic, O_TMA, Q tiles, ping-pong, causal tiles
    aligned to the end, idle consumers skipped, K/V stages))."""
    parts = text.split(":")
    flags = parts[3:]
    if len(parts) < 3 or any(f not in FLAGS for f in flags) or len(set(flags)) != len(flags):
        raise SystemExit(f"--also {text}: use D:BLOCK_N:CONSUMERS, then any of :{', :'.join(FLAGS)}")
    return text, (int(parts[0]), int(parts[1]), int(parts[2]), "nopersist" not in flags, "span" in flags,
                  "dyn" in flags, "otma" in flags, 2 if "q2" in flags else 1, "nopp" not in flags, "end" in flags,
                  "skip" in flags, 3 if "s3" in flags else 2)


def s_range(s: int) -> str:
    return "S<=1024" if s <= 1024 else "S 2048-4096" if s <= 4096 else "S>=8192"


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, nargs="?", default=SEED, help="the seed or a variant of it")
    parser.add_argument("--suite", default="wide")
    parser.add_argument("--also", nargs="*", default=[],
                        help="D:BLOCK_N:CONSUMERS[:nopersist][:span][:dyn][:otma][:q2][:nopp][:end][:skip][:s3]")
    parser.add_argument("--single", action="store_true", help="also the single configuration before the table")
    parser.add_argument("--min-s", type=int, default=None, help="only the cases of S from this")
    parser.add_argument("--max-s", type=int, default=None, help="only the cases of S up to this")
    parser.add_argument("--d", type=int, default=None, help="only the cases of this head dim")
    parser.add_argument("--causal", action="store_true", help="only the causal cases")
    parser.add_argument("--against", type=Path, action="append", default=[],
                        help="another folder (a knob variant) whose own plan is timed beside this one's")
    parser.add_argument("--json", type=Path, help="write every case's speedups here")
    args = parser.parse_args()
    extra = [parse_config(t) for t in args.also]

    import torch

    from avo import tasks
    from avo.config import EvalConfig
    from avo.evaluate.worker.loader import load_entry
    from avo.evaluate.worker.timing import Contender, InputRotation, time_as_configured
    from avo.gpus import resolve

    task, cfg, gpu = tasks.load("attention"), EvalConfig(), resolve("auto", "cuda")
    seed = load_entry(args.folder.resolve(), "attention").__globals__
    others = {folder.name: load_entry(folder.resolve(), "attention") for folder in args.against}
    builds: dict = {}

    def fixed(d: int, block_n: int, consumers: int, persistent: bool, span: bool, dynamic: bool = False,
              o_tma: bool = False, q_buffers: int = 1, pingpong: bool = True, align_end: bool = False,
              skip_idle: bool = False, stages: int = 2):
        key = (d, block_n, consumers, o_tma, q_buffers, pingpong, align_end, skip_idle, stages)
        if key not in builds:
            builds[key] = seed["_Build"](*key)
        planned = seed["Plan"](builds[key], persistent, span, dynamic, seed.get("PACK_GQA", False))

        def run(q, k, v, causal, scale):
            return seed["launch"](planned, q, k, v, torch.empty_like(q), causal, scale)
        return run

    print(f"{torch.cuda.get_device_name()}, suite {args.suite}, {args.folder}", flush=True)
    rows, wrong = [], 0
    for case in task.cases(args.suite):
        p = case.params
        if (args.max_s is not None and p["S"] > args.max_s) or (args.min_s is not None and p["S"] < args.min_s):
            continue
        if (args.d is not None and p["D"] != args.d) or (args.causal and not p["causal"]):
            continue
        configs = {"plan": seed["attention"]} | ({"single": fixed(p["D"], *SINGLE)} if args.single else {}) | others
        for name, config in extra:
            if config[0] == p["D"]:
                configs[name] = fixed(*config)
        sources = [task.make_inputs(case, 1000 + i, "cuda") for i in range(cfg.input_sets)]
        expected = task.library(*sources[0]).float()
        errors = {name: tasks.relative_error(fn(*sources[0]), expected) for name, fn in configs.items()}
        bad = [name for name, err in errors.items() if not err <= task.tolerance(case.dtype)]
        wrong += len(bad)
        rotation = InputRotation(sources, seed=7)
        contenders = [Contender(LIBRARY, rotation, lambda a: task.library(*a))]
        contenders += [Contender(name, rotation, lambda a, fn=fn: fn(*a)) for name, fn in configs.items()]
        measured = time_as_configured(contenders, cfg, device="cuda", l2_bytes=gpu.l2_mb << 20,
                                      paired_with=LIBRARY)
        lib_ms = measured[LIBRARY].ms
        row = {"case": case.name, "D": p["D"], "causal": p["causal"], "S": p["S"],
               "bucket": seed["bucket"](p["B"], p["Hq"], p["Hkv"], p["S"], p["D"], p["causal"]),
               "library_ms": lib_ms, "speedup": {name: lib_ms / measured[name].ms for name in configs},
               "errors": errors, "wrong": bad}
        rows.append(row)
        speedups = "  ".join(f"{name} {x:.3f}" for name, x in row["speedup"].items())
        print(f"{case.name:34s} {row['bucket']:10s} cuDNN {lib_ms:8.4f} ms  {speedups}"
              f"{'  WRONG: ' + ', '.join(bad) if bad else ''}", flush=True)
        del sources, rotation, contenders
        torch.cuda.empty_cache()

    names = list(dict.fromkeys(name for row in rows for name in row["speedup"]))
    def label(row: dict) -> str:
        return f"D{row['D']} {'causal' if row['causal'] else 'non-causal'} {s_range(row['S'])}"

    order = [f"D{d} {c} {r}" for d in (64, 128) for c in ("non-causal", "causal")
             for r in ("S<=1024", "S 2048-4096", "S>=8192")]
    groups = {key: [row for row in rows if label(row) == key] for key in order}
    groups |= {f"bucket {b}": [row for row in rows if row["bucket"] == b] for b in sorted({r["bucket"] for r in rows})}
    groups = {key: members for key, members in groups.items() if members}
    groups["all"] = rows
    print(f"\ngeomean speedup over {task.library_name()} (min-max), {torch.cuda.get_device_name()}")
    print(f"{'group':32s} " + " ".join(f"{name:>22s}" for name in names))
    for group, members in groups.items():
        cells = []
        for name in names:
            xs = [r["speedup"][name] for r in members if name in r["speedup"]]
            cells.append(f"{geomean(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})" if xs else "")
        print(f"{group:32s} " + " ".join(f"{c:>22s}" for c in cells))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if wrong:
        print(f"{wrong} outputs wrong (relative error over the task's tolerance)")
        sys.exit(1)


if __name__ == "__main__":
    from avo.errors import UserError

    try:
        main()
    except UserError as exc:  # no GPU here, or a suite the task does not have
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
