"""Spread of the fitness over repeated evaluations of one candidate, optionally A/B over an evaluator setting.

    python scripts/fitness_cv.py gemm kernels/gemm/triton_tiled --runs 5
    python scripts/fitness_cv.py gemm kernels/gemm/triton_tiled --runs 5 --ab compile_ahead=true,false

With --ab the settings alternate run by run (A, B, A, B, ...), so drift hits both alike. Each run prints its fitness,
the per-case speedups, its wall time and the GPU's SM clock and power just before it; then the mean and CV per
setting. Results go to stdout as JSON lines too (`--json FILE`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path


def gpu_state() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=10).stdout
        return out.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel")
    parser.add_argument("candidate")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--ab", default="", help="SETTING=A,B: an EvalConfig field and two values to alternate")
    parser.add_argument("--json", default="")
    args = parser.parse_args()

    from avo.config import EvalConfig
    from avo.evaluate.harness import Evaluator
    from avo.gpus import resolve

    variants = [("default", {})]
    if args.ab:
        name, _, values = args.ab.partition("=")
        variants = [(f"{name}={v}", {name: v}) for v in values.split(",")]
    gpu = resolve("auto", "cuda")
    evaluators = {label: Evaluator(args.kernel, device="cuda", gpu=gpu, config=EvalConfig(seed=1, **over))
                  for label, over in variants}
    fitness: dict[str, list[float]] = {label: [] for label, _ in variants}
    sink = open(args.json, "a") if args.json else None
    for i in range(args.runs):
        for label, _ in variants:
            state = gpu_state()
            started = time.monotonic()
            r = evaluators[label].evaluate(Path(args.candidate))
            wall = time.monotonic() - started
            fitness[label].append(r.fitness)
            cases = {c.case: round(c.speedup, 4) for c in r.bench_cases() if c.speedup is not None}
            print(f"{label:24s} run {i}: {r.status} fitness {r.fitness:.4f} wall {wall:.1f}s "
                  f"gpu before [{state}] cases {cases}", flush=True)
            if sink:
                sink.write(json.dumps({"variant": label, "run": i, "fitness": r.fitness, "wall_s": wall,
                                       "gpu_before": state, "cases": cases, "stage_s": r.stage_s}) + "\n")
    for label, values in fitness.items():
        mean = statistics.fmean(values)
        cv = statistics.pstdev(values) / mean if mean else float("nan")
        print(f"{label}: fitness {[round(v, 4) for v in values]} mean {mean:.4f} CV {cv:.2%}")


if __name__ == "__main__":
    main()
