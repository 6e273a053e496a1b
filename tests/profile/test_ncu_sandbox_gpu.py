"""Nsight Compute inside the sandbox for real, on the attention seed (needs an NVIDIA GPU, ncu and bubblewrap).

Where the driver lets only admins read performance counters (NVreg_RestrictProfilingToAdminUsers=1, the driver's
default), a sandboxed process, which has no capabilities, is refused them: then the refusal must be the one-line
error that says so, and the profile itself is left to a machine whose driver allows it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import needs

ROOT = Path(__file__).parents[2]
ATTENTION_SEED = ROOT / "kernels" / "attention" / "triton_fa2"

pytestmark = [pytest.mark.gpu, needs.bwrap]


def skip_unless_counters_are(restricted: bool) -> None:
    """A driver that does not say is taken to allow them (a profile refused there fails, which tells)."""
    from avo.profile.ncu import counters_restricted

    if bool(counters_restricted()) != restricted:
        pytest.skip("the driver lets only admins read performance counters: "
                    "test_a_sandboxed_profile_refused_the_counters_says_so covers this machine" if not restricted else
                    "the driver lets every user read performance counters")


def test_sandboxed_profile_of_the_attention_seed(tmp_path):
    from avo.gpus import resolve
    from avo.profile.ncu import profile_candidate

    skip_unless_counters_are(False)
    gpu = resolve("auto", "cuda")
    result = profile_candidate(ATTENTION_SEED, "attention", gpu=gpu, case_index=0, out_dir=tmp_path, sandbox="on",
                               hide=(ROOT / "runs",))
    s = result.summary
    assert "_attention_fwd" in s["kernel"] and s["case"] == "b8_h16-16_s4096_d128"
    assert s["duration_us"] > 0 and s["registers_per_thread"] > 0 and 0 < s["sm_throughput_pct"] <= 100
    assert s["stalls"] and s["tensor_pipe_pct"] is not None and s["tensor_pipe_pct"] > 0
    assert result.csv_path.exists() and result.csv_path.parent == tmp_path


def test_avo_profile_of_the_attention_seed_is_sandboxed_by_default():
    skip_unless_counters_are(False)
    done = subprocess.run([sys.executable, "-m", "avo", "profile", str(ATTENTION_SEED), "--kernel", "attention"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "_attention_fwd" in done.stdout and "top stalls" in done.stdout


def test_a_sandboxed_profile_refused_the_counters_says_so():
    skip_unless_counters_are(True)
    done = subprocess.run([sys.executable, "-m", "avo", "profile", str(ATTENTION_SEED), "--kernel", "attention"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "inside the sandbox" in done.stderr, done.stderr
    assert "NVreg_RestrictProfilingToAdminUsers=0" in done.stderr and "--no-sandbox" in done.stderr
