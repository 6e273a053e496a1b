"""Per-candidate evaluation wall time of a seed, median of N, the way `avo evolve` scores candidates before and
after the pool's prepared workers (evaluate/worker_process.py) and the reference's ops passed on between workers.

Every candidate is the seed with a comment added inside its first jitted function (or to each .cu source of a CUDA
C++ seed), so Triton (or NVRTC) has never compiled it, as every new candidate of a run. Four ways, each on fresh
evaluators:
  before        as `cold`, every case timed for all five rounds (target_error 0): avo before the pool and before
                a steady case could end its timing early;
  cold          harness.Evaluator without prewarm, nothing passed on: each evaluation starts, imports and records
                the reference's ops itself;
  back-to-back  the run's pool (one worker): the next candidate is handed over as soon as the previous result is
                in, as the heuristic agent does, so it may wait for the prepared worker's set-up;
  ready         the run's pool, the next candidate handed over once the prepared worker is set up (a model that
                thinks for some seconds between evaluations).
Every mode runs sandboxed or not as `--sandbox` says: on (the OS sandbox, each worker's caches seeded with the
trusted builds, evaluate/trusted_cache.py), off (unconfined, the user's shared caches), or unseeded (sandboxed with
fresh empty caches, as before the trusted builds existed). With the sandbox, the trusted builds are made first, once
(`first_worker_s`), so that one-time cost is not in any mode's medians. The summary gives each mode's median wall
time and median seconds per stage (`stage_s` of the results).

  python3 scripts/eval_wall.py attention kernels/attention/triton_fa2 --runs 5 --json out.json
  python3 scripts/eval_wall.py gemm kernels/gemm/triton_tiled --device interpret     # a dry run on the CPU
  python3 scripts/eval_wall.py gemm kernels/gemm/triton_tiled --modes cold --sandbox on     # then --sandbox off
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

JIT = re.compile(r"(@triton\.jit[^\n]*\ndef \w+\()")


def fresh_copies(seed: Path, count: int, root: Path) -> list[Path]:
    """Copies of the seed, each new to Triton's cache (a comment inside its first jitted function) or, for a CUDA
    C++ seed, to NVRTC's (a comment at the end of each .cu source)."""
    source = (seed / "kernel.py").read_text()
    sources = sorted(p.name for p in seed.glob("*.cu"))
    if not JIT.search(source) and not sources:
        raise SystemExit(f"{seed} has neither a @triton.jit function in kernel.py nor a .cu source to make new")
    folders = []
    for i in range(count):
        folder = root / f"c{i}"
        folder.mkdir(parents=True)
        for path in seed.iterdir():
            if path.is_file():
                (folder / path.name).write_bytes(path.read_bytes())
        stamp = f"{time.time_ns()} {i}"
        if JIT.search(source):
            marked = JIT.sub(lambda m: f"{m.group(1)}  # new to Triton's cache: {stamp}\n    ", source, 1)
            (folder / "kernel.py").write_text(marked)
        for name in sources:
            (folder / name).write_text((seed / name).read_text() + f"\n// new to NVRTC's cache: {stamp}\n")
        folders.append(folder)
    return folders


def measure(mode: str, args, folders: list[Path]) -> list[dict]:
    from avo.config import EvalConfig, PoolConfig
    from avo.evaluate.harness import Evaluator
    from avo.evaluate.pool import make_pool
    from avo.gpus import resolve

    settings = dict(item.split("=", 1) for item in args.set)
    settings["sandbox"] = "off" if args.sandbox == "off" else "on"
    if mode == "before":
        settings["target_error"] = "0"
    gpu, config = resolve("auto", args.device), EvalConfig(**settings)
    if mode in ("before", "cold"):
        scorer, slot = Evaluator(args.task, device=args.device, gpu=gpu, config=config), None
    else:
        scorer = make_pool(args.task, device=args.device, gpu=gpu, config=config, pool=PoolConfig())
        slot = scorer.slots[0]
    rows = []
    try:
        for folder in folders:
            if mode == "ready":
                while not slot._spares:
                    time.sleep(0.05)
                slot._spares[0].ready(600)
            began = time.monotonic()
            result = scorer.evaluate(folder)
            rows.append({"mode": mode, "wall_s": round(time.monotonic() - began, 3), "status": result.status,
                         "fitness": result.fitness, "stage_s": result.stage_s, "message": result.message[:300],
                         "rounds": [c.rounds for c in result.bench_cases()],
                         "speedup_error": [c.speedup_error for c in result.bench_cases()]})
            print(f"{mode:12s} {folder.name}: {rows[-1]['wall_s']:6.1f} s  {result.status} fitness "
                  f"{result.fitness:.4f}  setup {result.stage_s.get('setup', 0):.1f} waited "
                  f"{result.stage_s.get('waited', '-')} compile {result.stage_s.get('compile', 0):.1f} check "
                  f"{result.stage_s.get('check', 0):.1f} bench {result.stage_s.get('bench', 0):.1f}", flush=True)
    finally:
        scorer.close()
    return rows


def stage_medians(rows: list[dict]) -> dict[str, float]:
    """The median seconds of each stage over the rows (a stage some rows lack: over those that have it)."""
    stages = dict.fromkeys(name for row in rows for name in row["stage_s"])
    return {name: round(statistics.median(row["stage_s"][name] for row in rows if name in row["stage_s"]), 3)
            for name in stages}


def first_worker(args) -> float | None:
    """Seconds to start the first sandboxed worker where the trusted builds are not made yet (a set-up-only worker
    makes them first: once per toolchain and machine); None unsandboxed."""
    if args.sandbox != "on":
        return None
    from avo.config import EvalConfig
    from avo.evaluate.harness import Evaluator
    from avo.gpus import resolve

    config = EvalConfig(**dict(item.split("=", 1) for item in args.set), sandbox="on")
    evaluator = Evaluator(args.task, device=args.device, gpu=resolve("auto", args.device), config=config,
                          prewarm=True)
    began = time.monotonic()
    evaluator.warm()
    spent = round(time.monotonic() - began, 3)
    evaluator.close()
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task")
    parser.add_argument("seed", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--modes", default="before,cold,back-to-back,ready")
    parser.add_argument("--sandbox", choices=("on", "off", "unseeded"), default="on",
                        help="sandboxed with the trusted builds (on), unconfined (off), or sandboxed with empty "
                             "caches (unseeded)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="an EvalConfig setting for every mode, e.g. --set warmup_ms=10")
    args = parser.parse_args()
    if args.sandbox == "unseeded":
        from avo.evaluate import worker_process

        worker_process._trusted_caches = lambda *_, **__: None  # every worker's caches start empty
    summary, rows = {}, []
    built = first_worker(args)
    with tempfile.TemporaryDirectory(prefix="avo-evalwall-") as tmp:
        for mode in args.modes.split(","):
            measured = measure(mode, args, fresh_copies(args.seed, args.runs, Path(tmp) / mode))
            rows += measured
            correct = [r for r in measured if r["status"] == "correct"]
            walls = [r["wall_s"] for r in correct]
            summary[mode] = {"median_wall_s": statistics.median(walls) if walls else None, "walls": walls,
                             "median_stage_s": stage_medians(correct), "fitness": [r["fitness"] for r in correct],
                             "correct": len(walls), "of": len(measured)}
    where = "interpreter wall clock on the CPU, not GPU performance" if args.device == "interpret" else args.device
    print(json.dumps({"task": args.task, "seed": str(args.seed), "device": args.device, "timing": where,
                      "sandbox": args.sandbox, "first_worker_s": built, "summary": summary}, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"sandbox": args.sandbox, "first_worker_s": built, "summary": summary,
                                         "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
