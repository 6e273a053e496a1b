"""Nsight Compute for real, on the attention seed (needs an NVIDIA GPU and ncu with counter access). The seed is avo's
own shipped code, so it is profiled unconfined here: these tests are of ncu and its parsing, whatever the driver's
counter setting; the sandboxed profile is test_ncu_sandbox_gpu.py's."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
ATTENTION_SEED = ROOT / "kernels" / "attention" / "triton_fa2"

pytestmark = pytest.mark.gpu


def test_profile_of_the_attention_seed(tmp_path):
    from avo.gpus import resolve
    from avo.profile.ncu import profile_candidate

    gpu = resolve("auto", "cuda")
    result = profile_candidate(ATTENTION_SEED, "attention", gpu=gpu, case_index=0, out_dir=tmp_path,
                                sandbox="off")
    s = result.summary
    assert "_attention_fwd" in s["kernel"] and s["case"] == "b8_h16-16_s4096_d128"
    assert s["duration_us"] > 0 and s["registers_per_thread"] > 0 and s["dynamic_shared_bytes"] > 0
    assert 0 < s["sm_throughput_pct"] <= 100 and 0 < s["achieved_occupancy_pct"] <= 100
    assert s["stalls"] and s["stall_source"] == "metrics"
    assert s["tensor_pipe_pct"] is not None and s["tensor_pipe_pct"] > 0
    assert 0 < s["roofline"]["pct_of_peak_compute"] < 100 and s["roofline"]["bound"] == "compute"
    assert len(result.text.splitlines()) <= 40
    assert result.csv_path.exists() and result.csv_path.parent == tmp_path


def test_avo_profile_on_the_attention_seed_takes_under_a_minute():
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "avo", "profile", str(ATTENTION_SEED), "--kernel", "attention",
                           "--no-sandbox"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "_attention_fwd" in done.stdout and "top stalls" in done.stdout
    assert seconds < 60, f"avo profile took {seconds:.1f} s"


def test_profile_of_the_librarys_call_names_its_kernel(tmp_path):
    from avo.gpus import resolve
    from avo.profile.ncu import profile_candidate

    gpu = resolve("auto", "cuda")
    result = profile_candidate(None, "gemm", gpu=gpu, case_index=0, sandbox="off")
    s = result.summary
    assert s["source"] == "library" and s["case"] == "4096x4096x4096"
    assert s["duration_us"] > 0 and s["registers_per_thread"] > 0 and s["tensor_pipe_pct"] > 0
    assert "mm_desc" not in s["kernel"] and "_attention_fwd" not in s["kernel"]  # none of avo's seeds' kernels
    assert result.text.startswith(f"ncu profile of the library's kernel {s['kernel']}")
