"""Profile one bench case of a candidate under Nsight Compute and return a compact summary.

ncu runs `python -m avo.profile.driver` in a child process with a scrubbed environment and a timeout; only kernels
launched inside the driver's NVTX range (the measured call, after warm-up) are profiled, with clocks left as the
GPU runs them (`--clock-control none`) so durations match what the evaluator times. ncu and the candidate run inside
the evaluations' OS sandbox where its policy wants it (confine.py); there they need the driver to let a process
without capabilities read the performance counters (NVreg_RestrictProfilingToAdminUsers=0).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from avo.util import procs
from avo.profile import ProfileError, confine
from avo.profile.driver import RANGE
from avo.profile.ncu_report import BANK_CONFLICT_METRICS, TENSOR_PIPE_METRICS, parse_details_csv
from avo.profile.ncu_summary import render, summarize

SECTIONS = ("SpeedOfLight", "MemoryWorkloadAnalysis", "ComputeWorkloadAnalysis", "Occupancy", "LaunchStats",
            "WarpStateStats", "SchedulerStats")
STALL_REASONS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle",
                 "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction",
                 "not_selected", "short_scoreboard", "sleeping", "tex_throttle", "wait")
MAX_KERNELS = 4
"""Kernels profiled per call at most: each costs several replays, and the first few say where the time goes."""
DEFAULT_TIMEOUT_S = 300.0
PERMISSION_HELP = ("ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM): run as root, or have an "
                   "administrator load the nvidia module with NVreg_RestrictProfilingToAdminUsers=0")
SANDBOX_PERMISSION_HELP = (
    "ncu was refused this GPU's performance counters inside the sandbox (ERR_NVGPUCTRPERM: the sandbox drops every "
    "capability, and this driver lets only admins profile): have an administrator load the nvidia module with "
    "NVreg_RestrictProfilingToAdminUsers=0, or, for a kernel you trust, profile it unconfined (--no-sandbox, or "
    "evaluation.sandbox: off)")
DRIVER_PARAMS = Path("/proc/driver/nvidia/params")


@dataclass
class NcuProfile:
    summary: dict
    text: str
    csv_path: Path | None
    """Where the raw details CSV was kept (a run's profiles/), else None."""
    seconds: float


def extra_metrics(arch: str) -> list[str]:
    """Metrics beyond the sections: per-reason stalls, shared-memory bank conflicts, tensor-pipe activity."""
    metrics = [f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio" for r in STALL_REASONS]
    metrics += list(BANK_CONFLICT_METRICS.values())
    if arch.startswith("sm_90"):
        metrics += list(TENSOR_PIPE_METRICS)  # gmma (wgmma) exists on Hopper only
    return metrics


def find_ncu(explicit: str | None = None) -> str:
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    candidates = [explicit] if explicit else [shutil.which("ncu"), os.path.join(cuda_home, "bin", "ncu")]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise ProfileError("Nsight Compute (ncu) was not found on PATH or in $CUDA_HOME/bin: install Nsight Compute "
                       "(it ships with the CUDA toolkit) or put ncu on PATH")


def child_env() -> dict[str, str]:
    """What the profiled program may see: the evaluator's scrubbed environment (no API keys or tokens, no
    interpreter mode) with a fixed number format."""
    from avo.evaluate.harness import scrubbed_env

    env = scrubbed_env("cuda")
    env["LC_ALL"] = "C"  # ncu groups digits by locale; the parser reads the C locale's "193,312"
    return env


def ncu_command(ncu: str, *, candidate: Path | None, task_spec: str, suite: str, case_index: int, log: Path,
                status: Path, metrics: list[str], workload_file: Path | None = None) -> list[str]:
    cmd = [ncu, "--target-processes", "all", "--clock-control", "none", "--nvtx", "--nvtx-include", f"{RANGE}/",
           "--launch-count", str(MAX_KERNELS)]
    for section in SECTIONS:
        cmd += ["--section", section]
    if metrics:
        cmd += ["--metrics", ",".join(metrics)]
    cmd += ["--csv", "--page", "details", "--log-file", str(log),
            sys.executable, "-m", "avo.profile.driver",
            *(["--library"] if candidate is None else ["--candidate", str(candidate)]), "--kernel", task_spec,
            "--suite", suite, "--case", str(case_index), "--status", str(status)]
    if workload_file is not None:
        cmd += ["--workload", str(workload_file)]
    return cmd


def run_command(cmd: list[str], *, timeout_s: float, cwd: Path,
                env: dict[str, str] | None = None) -> tuple[int | None, str]:
    """Exit code (None after a timeout) and combined output of `cmd` run in `cwd` with child_env() and `env` on top;
    at the timeout the whole process group is killed."""
    code, out, _ = procs.run(cmd, timeout_s=timeout_s, cwd=cwd, env={**child_env(), **(env or {})})
    return code, out


def counters_restricted(params: Path | None = None) -> bool | None:
    """Whether the NVIDIA driver (its parameters file, DRIVER_PARAMS) lets only admins (CAP_SYS_ADMIN, which no
    sandboxed process has) read performance counters; None where it does not say (no driver loaded)."""
    try:
        text = (params or DRIVER_PARAMS).read_text()
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "RestrictProfilingToAdminUsers":
            return value.strip() != "0"
    return None


def explain_failure(returncode: int, output: str, status: dict | None, case: str,
                    sandboxed: bool = False) -> ProfileError:
    """The one-line reason a profile produced no kernel rows."""
    if "ERR_NVGPUCTRPERM" in output:
        return ProfileError(SANDBOX_PERMISSION_HELP if sandboxed else PERMISSION_HELP)
    if status is not None and not status.get("ok"):
        error = status.get("error", "").strip().splitlines() or ["unknown error"]
        failure = ProfileError(f"the candidate failed before its call on {case} could be profiled: {error[-1]}")
        failure.detail = status.get("error", "")
        return failure
    errors = [line.strip() for line in output.splitlines() if line.startswith("==ERROR==")]
    if errors:
        return ProfileError(f"ncu failed (exit {returncode}): {errors[-1].removeprefix('==ERROR==').strip()}")
    if status is None:
        tail = " ".join(output.strip().splitlines()[-2:])[-300:]
        return ProfileError(f"the profiled program ended before finishing its call on {case} "
                            f"(exit {returncode}): {tail}")
    warnings = [ln.removeprefix("==WARNING==").strip() for ln in output.splitlines() if ln.startswith("==WARNING==")]
    said = f" (ncu: {warnings[-1]})" if warnings else ""
    return ProfileError(f"no kernel launched inside the measured call on {case}, so ncu profiled nothing{said}: the "
                        "entry must launch its work as GPU kernels")


def pick_case(task_spec: str, suite: str, index: int, workload=None):
    """The task (timing `workload` as its bench suite, if given) and its case `index` of `suite`; ProfileError
    naming the valid range otherwise."""
    from avo.tasks import load

    task = load(task_spec, workload)
    cases = task.cases(suite)
    if not 0 <= index < len(cases):
        raise ProfileError(f"case {index} does not exist: the {suite} suite of {task.name} has cases "
                           f"0..{len(cases) - 1}")
    return task, cases[index]


def profile_candidate(candidate_dir: Path | None, task_spec: str, *, gpu, case_index: int = 0, suite: str = "bench",
                      out_dir: Path | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                      ncu: str | None = None, workload=None, sandbox: str = "auto",
                      hide: Sequence[Path] = ()) -> NcuProfile:
    """Profile case `case_index` of `suite` (of a workload's cases as the bench suite, if given) as the candidate in
    `candidate_dir` runs it, or as the library does when that is None (the kernel a candidate races: its name, which
    names the library's tile shape, its grid, registers and stalls); raises ProfileError with a one-line reason when
    there is no profile. `sandbox`: EvalConfig.sandbox's policy for ncu and the candidate; `hide`: what the sandbox
    masks besides the home folder and /root (the runs folder)."""
    ncu_path = find_ncu(ncu)
    candidate_dir = None if candidate_dir is None else Path(candidate_dir).resolve()
    task, case = pick_case(task_spec, suite, case_index, workload)
    task_spec = confine.task_spec_for_child(task_spec)
    started = time.monotonic()
    with procs.temp_dir("ncu") as tmp:
        log, status_path = Path(tmp) / "details.csv", Path(tmp) / "status.json"
        workload_file = None
        if workload is not None:
            workload_file = Path(tmp) / "workload.json"
            workload_file.write_text(workload.model_dump_json())
        metrics = extra_metrics(gpu.arch)
        for attempt in range(2):
            cmd = ncu_command(ncu_path, candidate=candidate_dir, task_spec=task_spec, suite=suite,
                              case_index=case_index, log=log, status=status_path, metrics=metrics,
                              workload_file=workload_file)
            child = confine.command(cmd, mode=sandbox, scratch=Path(tmp), candidate=candidate_dir,
                                    task_spec=task_spec, hide=hide, programs=[ncu_path])
            left = max(1.0, timeout_s - (time.monotonic() - started))
            returncode, output = run_command(child.cmd, timeout_s=left, cwd=Path(tmp), env=child.env)
            if returncode is None:
                raise ProfileError(f"ncu did not finish within {timeout_s:.0f} s and was stopped: the candidate may "
                                   "hang, or its kernels take too long to replay (try a smaller case with --case)")
            rejected = [ln for ln in output.splitlines() if ln.startswith("==ERROR==") and "metric" in ln.lower()]
            if not (rejected and metrics and attempt == 0):
                break
            metrics = []  # this ncu or GPU lacks one of the extra metrics: the sections alone still answer
        details = log.read_text(errors="replace") if log.exists() else ""
        status = json.loads(status_path.read_text()) if status_path.exists() else None
        kernels = parse_details_csv(details) or parse_details_csv(output)
        if not kernels:
            raise explain_failure(returncode, details + "\n" + output, status, case.name, child.sandboxed)
        summary = summarize(kernels, gpu=gpu, flops=task.flops(case), nbytes=task.bytes(case), case=case.name,
                            task=task.name)
        summary["source"] = "library" if candidate_dir is None else "candidate"
        csv_path = _keep(details or output, summary, out_dir, case_index) if out_dir is not None else None
    return NcuProfile(summary=summary, text=render(summary), csv_path=csv_path, seconds=time.monotonic() - started)


def _keep(details: str, summary: dict, out_dir: Path, case_index: int) -> Path:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    whose = "-library" if summary.get("source") == "library" else ""
    stem = f"ncu{whose}-case{case_index}-{time.strftime('%Y%m%d-%H%M%S')}"
    csv_path, n = out_dir / f"{stem}.csv", 1
    while csv_path.exists():
        n += 1
        csv_path = out_dir / f"{stem}-{n}.csv"
    stem = csv_path.stem
    csv_path.write_text(details)
    (out_dir / f"{stem}.json").write_text(json.dumps(summary, indent=2))
    return csv_path
