"""Drives a session in a subprocess, as `avo evolve` would, for the SIGINT / resume test: the fake task and
evaluator (each evaluation taking EVAL_DELAY_S) and a scripted model whose every turn writes a slightly faster
kernel (SPEED from FIRST_STEP on) and evaluates it.

Usage: python agent_driver.py SEED_DIR RUNS_DIR EVAL_DELAY_S FIRST_STEP MAX_CANDIDATES|- [RUN_TO_RESUME]
Prints what the command would print; exits with its code.
"""

from __future__ import annotations

import sys
from pathlib import Path

from agent_fakes import SEED_SOURCE, FakeEvaluator, evolve, fake_session
from avo.agent.models.scripted import ScriptedModel, turn


def step(index: int):
    speed = round(1.0 + 0.25 * (index + 1), 2)
    source = SEED_SOURCE.replace("SPEED = 1.0", f"SPEED = {speed}")
    return turn(("write_file", {"path": "kernel.py", "content": source}),
                ("evaluate", {"rationale": f"expect {speed}x"}))


if __name__ == "__main__":
    seed, runs, delay, first, limit = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), \
        sys.argv[5]
    resume = sys.argv[6] if len(sys.argv) > 6 else None
    flags = {"runs_dir": str(runs)} | ({} if limit == "-" else {"budget.max_candidates": int(limit)})
    model = ScriptedModel([step(i) for i in range(first, first + 1000)])
    session, run, lines = fake_session(runs.parent, model, evaluator=FakeEvaluator(delay_s=delay), seed=seed,
                                       flags=flags, resume=resume)
    done = evolve(session, run, lines)
    print(done.out, flush=True)
    sys.exit(done.code)
