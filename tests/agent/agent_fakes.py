"""A fake task and evaluator for fast loop tests: the 'kernel' states its own speed (SPEED = 1.25).

The loop, tools, lineage and run directory are real; only scoring is instant and deterministic. `fake_session`
builds a session on them (with the given model, or the one the flags name) and `evolve` drives it the way
`avo evolve` does, printing included.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from avo.agent.controls import Controls
from avo.agent.models.factory import make_model
from avo.agent.session import Session, closing, settle
from avo.commands.evolve import summarize
from avo.evaluate.result import CaseResult, EvalResult
from avo.run.directory import Run
from avo.tasks.base import Case

SEED_SOURCE = '''"""A stand-in kernel: the fake evaluator reads SPEED as this candidate's speedup."""
SPEED = 1.0  # avo: tune 1.0 1.5 2.0


def gemm(a, b):
    return a @ b
'''


def write_seed(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.py").write_text(SEED_SOURCE)
    return folder


class FakeTask:
    """C = A @ B for tests: kernel.py must define gemm(a, b)."""

    name = "gemm"
    entry = "gemm"

    def __init__(self, seed_dir: Path):
        self.seed_dir = seed_dir

    def cases(self, suite: str) -> list[Case]:
        return [Case("64x64x64", {"m": 64, "n": 64, "k": 64}, "float16")]

    def default_seed(self) -> str:
        return str(self.seed_dir)


class FakeEvaluator:
    def __init__(self, *, delay_s: float = 0.0, spread: float = 0.0, suspicious_once: bool = False):
        self.calls: list[str] = []
        self.delay_s, self.spread, self.suspicious_once = delay_s, spread, suspicious_once

    def evaluate(self, candidate_dir: Path) -> EvalResult:
        self.calls.append("evaluate")
        return self._score(Path(candidate_dir))

    def confirm(self, candidate_dir: Path, incumbent_dir: Path) -> tuple[EvalResult, EvalResult]:
        self.calls.append("confirm")
        return self._score(Path(candidate_dir), confirming=True), self._score(Path(incumbent_dir), confirming=True)

    def _score(self, folder: Path, confirming: bool = False) -> EvalResult:
        if self.delay_s:
            import time

            time.sleep(self.delay_s)
        source = (folder / "kernel.py").read_text()
        try:
            compile(source, "kernel.py", "exec")
        except SyntaxError as exc:
            return EvalResult(status="compile_error", rule="compile", message=f"kernel.py:{exc.lineno}: {exc.msg}")
        if "WRONG" in source:
            return EvalResult(status="incorrect", rule="check.mismatch",
                              message="case 64x64x64: relative error 0.5 above tolerance 0.01")
        speed = float(re.search(r"^SPEED = ([0-9.]+)", source, re.M).group(1))
        case = CaseResult(case="64x64x64", suite="tiny", dtype="float16", correct=True, rel_err=1e-4, tolerance=1e-2,
                          ms=1.0 / speed, library_ms=1.0, tflops=0.5 * speed, library_tflops=0.5, speedup=speed,
                          spread=self.spread, library_spread=self.spread)
        suspicious = self.suspicious_once and not confirming and speed >= 10
        return EvalResult(status="correct", cases=[case], fitness=speed, timing_source="interpreter",
                          library="torch.matmul", device="cpu", gpu="h200", suspicious=suspicious,
                          suspicious_reason="above the GPU's peak" if suspicious else "")


@dataclass
class Outcome:
    code: int
    """What `avo evolve` would exit with: 0 finished, 130 stopped (resumable)."""
    run: Run
    lines: list[str] = field(default_factory=list)
    """What the command would print, but the live view."""
    view: str = ""
    """What the live view printed (plain log lines)."""

    @property
    def out(self) -> str:
        return "\n".join(self.lines) + "\n" + self.view


def fake_session(tmp_path: Path, model=None, *, evaluator=None, task=None, seed: Path | None = None,
                 flags: dict | None = None, resume: str | None = None) -> tuple[Session, Run | None, list[str]]:
    """A session on the fake task and evaluator; without `model`, the one the flags name (`agent.kind`, ...), built
    with the session's retry policy as `avo evolve` builds it. Returns the session, the run to resume and the list
    its progress lines go to."""
    if seed is None:
        seed = tmp_path / "seed"
        if not (seed / "kernel.py").is_file():
            write_seed(seed)
    overrides = {"kernel": "gemm", "device": "interpret", "runs_dir": str(tmp_path / "runs"), "budget.hours": 1.0,
                 **(flags or {})}
    settled = settle(overrides, None, resume)
    lines: list[str] = []
    controls = Controls()
    if model is None:
        model = make_model(settled.config.agent, seed=settled.config.seed, policy=controls.retry_policy(),
                           say=lines.append)
    session = Session(config=settled.config, task=task or FakeTask(seed), gpu=settled.gpu,
                      evaluator=evaluator or FakeEvaluator(), model=model, seed_dir=seed, controls=controls,
                      say=lines.append)
    return session, settled.run, lines


def evolve(session: Session, run: Run | None = None, lines: list[str] | None = None) -> Outcome:
    """Open and drive the session as `avo evolve` does; its printed lines go to `lines` (and the Outcome)."""
    lines = lines if lines is not None else []
    session.say = lines.append
    view = io.StringIO()
    with closing(session.evaluator):
        run = session.open(run)
        reason = session.drive(run, quiet=True, out=view)
    code = summarize(run, reason, session.config.runs_dir, lines.append)
    return Outcome(code, run, lines, view.getvalue())
