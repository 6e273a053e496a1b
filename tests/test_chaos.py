"""The chaos test, short version: an interpreter evolve SIGKILLed five times (during an evaluation, a commit, a
confirmation, and at random), resumed each time; nothing committed is lost or doubled, the lineage passes git fsck,
the best is the fittest accepted candidate, and no avo process or temp folder is left. scripts/soak.sh runs the same
for hours."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_killed_five_times_and_resumed_nothing_is_lost(tmp_path):
    # Each kill waits for its moment to be seen (a confirmation's start in the transcript, a git child writing the
    # commit, a worker scoring), however late a loaded machine reaches it: chaos.py's patience is generous, and the
    # timeout only stops a hang.
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "chaos.py"), "--work", str(tmp_path),
                           "--kills", "5"], capture_output=True, text=True, timeout=1800)
    report = json.loads(done.stdout[done.stdout.index("\n{") + 1:])
    assert done.returncode == 0 and report["problems"] == [], done.stdout[-3000:] + done.stderr[-2000:]
    assert report["kills_total"] >= 5 and report["fsck_failures"] == 0
    for moment in ("evaluation", "commit", "confirmation"):
        assert report.get(f"kills during {moment}", 0) >= 1, f"no kill landed during a {moment}: {report}"
    assert report["evaluations"] >= 2 and report["accepted"] >= 1
