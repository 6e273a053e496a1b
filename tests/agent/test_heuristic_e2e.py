"""`avo evolve --agent heuristic` end to end under the Triton interpreter: real tools, evaluator and lineage."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from avo.agent.heuristic.knobs import parse_point_tag
from avo.run.directory import Run

REPO = Path(__file__).resolve().parents[2]


def evolve(runs: Path, *extra: str, timeout: float = 600.0) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    return subprocess.run([sys.executable, "-m", "avo", "evolve", "--kernel", "gemm", "--device", "interpret",
                           "--agent", "heuristic", "--runs-dir", str(runs), "--quiet", *extra],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def candidates(run: Run, tmp: Path) -> list[tuple[str, str, str, str]]:
    """(cid, status, rationale, hash of kernel.py) of every candidate, oldest first."""
    rows = []
    for info in reversed(run.lineage.log()):
        dest = tmp / info.cid
        run.lineage.checkout(info.cid, dest)
        digest = hashlib.sha256((dest / "kernel.py").read_bytes()).hexdigest()
        rows.append((info.cid, info.status, info.rationale, digest))
    return rows


@pytest.mark.slow
def test_six_distinct_candidates_each_at_a_named_knob_point(tmp_path):
    untimed = tmp_path / "untimed.json"  # what it tries does not need timing: each point is new and named
    untimed.write_text(json.dumps({"evaluation": {"bench_suite": ""}}))
    proc = evolve(tmp_path / "runs", "--max-candidates", "6", "--config", str(untimed))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "agent: heuristic" in proc.stdout
    run = Run.open("latest", tmp_path / "runs")
    rows = candidates(run, tmp_path / "co")
    assert len(rows) == 7  # the baseline and six candidates
    assert len({digest for *_, digest in rows}) == 7, "a source was evaluated twice"
    assert rows[0][1] == "correct", rows[0]
    for cid, _status, rationale, _ in rows[1:]:
        assert parse_point_tag(rationale), f"{cid} has no knob point in its rationale: {rationale!r}"
        assert "expect" in rationale
    assert any(status == "correct" for _, status, _, _ in rows[1:]), rows


@pytest.mark.slow
def test_from_the_naive_seed_the_first_move_is_the_big_tile(tmp_path):
    untimed = tmp_path / "untimed.json"  # this seed's first move is the same untimed, in half the time
    untimed.write_text(json.dumps({"evaluation": {"bench_suite": ""}}))
    proc = evolve(tmp_path / "runs", "--max-candidates", "1", "--seed-kernel", "triton_naive", "--config", str(untimed))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    run = Run.open("latest", tmp_path / "runs")
    first = run.lineage.log()[0]
    point = parse_point_tag(first.rationale)
    assert point is not None and point["BLOCK_M"] == 128 and point["BLOCK_N"] == 256 and point["NUM_WARPS"] == 8
    assert first.status == "correct", first.summary
