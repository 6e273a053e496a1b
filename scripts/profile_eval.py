"""Where an evaluation's seconds go: the evaluator's worker run in this process under cProfile.

    python scripts/profile_eval.py kernels/attention/triton_fa2 --kernel attention [--out DIR] [--top 45]

Prints the result's stage seconds, then the functions with the most cumulative and the most own time, and writes
the raw profile (`eval.prof`, for `python -m pstats` or snakeviz) to --out. The worker is not isolated here (no child
process, no timeouts): use it on kernels you trust, to find the evaluator's own costs. Time spent waiting on the GPU
shows up in the calls that synchronize (`torch.cuda.synchronize`, `Event.synchronize`, `.item()`, `.tolist()`).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("candidate")
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--out", default=".")
    parser.add_argument("--top", type=int, default=45)
    parser.add_argument("--device", choices=["cuda", "interpret"], default="cuda")
    args = parser.parse_args()
    if args.device == "interpret":  # the tiny suite under the interpreter: for trying the script without a GPU
        os.environ["TRITON_INTERPRET"] = "1"

    from avo.config import EvalConfig
    from avo.evaluate.worker import evaluation
    from avo.evaluate.worker.candidate import Progress
    from avo.evaluate.harness import Evaluator
    from avo.gpus import PROFILES

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    evaluator = Evaluator(args.kernel, device=args.device, gpu=PROFILES[args.gpu], config=EvalConfig(seed=0))
    with tempfile.TemporaryDirectory() as tmp:
        request = evaluator.request([Path(args.candidate)], "evaluate")
        progress = Progress(open(Path(tmp) / "progress", "w"))
        profiler = cProfile.Profile()
        started = time.perf_counter()
        results = profiler.runcall(evaluation.run, request, progress)
        wall = time.perf_counter() - started
    profiler.dump_stats(str(out / "eval.prof"))
    r = results[0]
    print(f"status {r.status}  fitness {r.fitness:.3f}  wall {wall:.1f} s (profiled: slower than unprofiled)")
    print("stage_s", r.stage_s)
    for key in ("cumulative", "tottime"):
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).strip_dirs().sort_stats(key).print_stats(args.top)
        print(f"\n== by {key}\n" + text.getvalue().strip())
        (out / f"eval-{key}.txt").write_text(text.getvalue())


if __name__ == "__main__":
    sys.exit(main())
