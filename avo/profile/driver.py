"""The program Nsight Compute watches: run one bench case of a candidate, with only the measured call profiled.

    python -m avo.profile.driver --candidate DIR --kernel gemm --case 0 --status status.json
    python -m avo.profile.driver --library --kernel gemm --case 0 --status status.json

Imports the candidate (or, with --library, takes the task's library call: cuDNN SDPA, cuBLAS through torch.matmul),
builds the case's inputs on the GPU, calls it a few times (compilation, plans and caches warm), then once more inside
the NVTX push/pop range RANGE, which ncu filters on. What happened is written to the status file as JSON (ncu owns
stdout): {"ok": true, "case": ...} or {"ok": false, "error": "..."}.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

RANGE = "avo_profile"
WARMUP_CALLS = 3


def run_case(candidate: Path | None, task_spec: str, suite: str, index: int, seed: int,
             workload_file: Path | None = None) -> str:
    """Run case `index` of `suite` with the candidate's entry, or the library's call when `candidate` is None."""
    import torch

    from avo.evaluate.worker.loader import load_entry
    from avo.tasks import load
    from avo.tasks.workload import Workload

    workload = Workload.model_validate_json(workload_file.read_text()) if workload_file else None
    task = load(task_spec, workload)
    case = task.cases(suite)[index]
    entry = None if candidate is None else load_entry(candidate, task.entry)
    inputs = task.make_inputs(case, seed, "cuda")

    def call():
        return task.library(*inputs) if entry is None else task.call(entry, inputs)

    for _ in range(WARMUP_CALLS):
        call()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(RANGE)
    call()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    return case.name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m avo.profile.driver")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--candidate", type=Path)
    source.add_argument("--library", action="store_true", help="profile the task's library call instead")
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--suite", default="bench")
    parser.add_argument("--case", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--status", type=Path, required=True)
    parser.add_argument("--workload", type=Path, default=None, help="JSON of the run's workload (its bench suite)")
    args = parser.parse_args(argv)
    from avo.util.procs import die_with_parent

    die_with_parent()  # started by ncu, not by avo: when ncu dies with avo, this goes too
    try:
        candidate = None if args.library else args.candidate
        status = {"ok": True, "case": run_case(candidate, args.kernel, args.suite, args.case, args.seed, args.workload)}
    except BaseException as exc:  # whatever the candidate raised is reported, never a traceback on ncu's output
        if isinstance(exc, KeyboardInterrupt):
            raise
        message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        status = {"ok": False, "error": message.strip()[:2000]}
    args.status.write_text(json.dumps(status))
    return 0 if status["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
