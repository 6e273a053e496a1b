"""Runs the real `avo` CLI in a subprocess with the fake task and evaluator (for the SIGINT / resume test).

Usage: python agent_driver.py SEED_DIR EVAL_DELAY_S -- avo arguments...
"""

from __future__ import annotations

import sys
from pathlib import Path

from agent_fakes import FakeEvaluator, FakeTask

import avo.commands.evolve as evolve_command
from avo.cli import main

if __name__ == "__main__":
    seed_dir, delay = Path(sys.argv[1]), float(sys.argv[2])
    evolve_command.load_task = lambda spec: FakeTask(seed_dir)
    evolve_command.make_evaluator = lambda *a, **k: FakeEvaluator(delay_s=delay)
    sys.exit(main(sys.argv[sys.argv.index("--") + 1:]))
