"""Fake evaluation results and candidate folders for lineage, run and `avo runs` tests (no GPU, no evaluator)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from avo.evaluate.result import CaseResult, EvalResult

BENCH = ("4096x4096x4096", "8192x8192x8192")


def result(status: str = "correct", fitness: float = 1.0, tflops: float = 500.0, **extra) -> EvalResult:
    """An EvalResult as the evaluator would write it: timed bench cases when correct, a rule when not."""
    if status != "correct":
        return EvalResult(status=status, rule=extra.pop("rule", "check.mismatch"),
                          message=extra.pop("message", f"{status}: case 1 relative error 0.3 > 0.01"), **extra)
    cases = [CaseResult(case=name, suite="bench", correct=True, rel_err=1e-3, ms=1.0, tflops=tflops * scale,
                        library_tflops=700.0, speedup=tflops * scale / 700.0)
             for name, scale in zip(BENCH, (1.0, 0.9))]
    return EvalResult(status="correct", fitness=fitness, cases=cases, timing_source="gpu", gpu="h200",
                      library="cuBLAS", **extra)


def write_candidate(folder: Path, kernel: str, extra: dict[str, str] | None = None) -> Path:
    """Make `folder` hold exactly kernel.py (and `extra` files)."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.rglob("*"):
        if old.is_file():
            old.unlink()
    (folder / "kernel.py").write_text(kernel)
    for name, text in (extra or {}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def fsck(git_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["git", f"--git-dir={git_dir}", "fsck", "--full", "--strict"], capture_output=True,
                          text=True)


def fsck_problems(git_dir: Path) -> list[str]:
    """What `git fsck --full` reports beyond unreferenced (dangling) objects, which it does not count as errors."""
    done = fsck(git_dir)
    lines = (done.stdout + done.stderr).splitlines()
    problems = [line for line in lines if not line.startswith(("dangling ", "notice: "))]
    return problems + ([f"exit status {done.returncode}"] if done.returncode else [])
