"""The parent side of an evaluation: spawn the worker, watch its stages, kill it when it overstays, read its verdict.

The worker runs as `python -m avo.evaluate.worker` in a new session (its own process group) that dies with avo
(avo.util.procs), from an empty folder, with API keys, tokens and other secrets removed from its environment (the
policy is avo.util.secrets), inside the OS sandbox where EvalConfig.sandbox asks for it (avo.evaluate.sandbox: its own
PID namespace, no network, writes to its own box only; the runs folder, the home folder and /root masked). Stage
limits come from EvalConfig: import (import and first launch, i.e. compile), check and bench; the whole group is
SIGKILLed when one is exceeded. A child that dies without a result is a crash, reported with its signal and the tail
of its stderr. Its result comes on a pipe (worker_process.py), and a GPU result faster than the GPU can be is
rejected here, outside the candidate's process (plausible.py). Nothing the candidate does can raise here: every
outcome is an EvalResult. The process itself (worker_process.py) may have been started, and set up for the task,
before the candidate arrived; it scores only that candidate.
"""

from __future__ import annotations

import functools
import signal
import threading
import time
from pathlib import Path

from avo.util import procs
from avo.config import EvalConfig
from avo.evaluate import sandbox
from avo.evaluate.plausible import impossible
from avo.evaluate import interpreter
from avo.evaluate.result import EvalResult
from avo.evaluate.worker_process import WorkerProcess
from avo.gpus import GpuProfile
from avo.util.secrets import without_secrets

STAGE_GROUP = {"start": "import", "static": "import", "import": "import", "compile": "import", "check": "check",
               "bench": "bench", "done": "done"}
DONE_GRACE_S = 60.0
"""How long the worker may take to exit after writing its result."""
POLL_S = 0.05
STDERR_TAIL = 3000


def scrubbed_env(device: str) -> dict[str, str]:
    """The parent's environment minus its secrets (util/secrets.py); for the interpreter, TRITON_INTERPRET set and the
    GPUs hidden (evaluate/interpreter.py).

    Inductor (torch.compile, a KernelBench baseline) compiles on the worker's own thread: with a compile pool its
    threads start whenever results come back, at any moment, and the Sentinel would take them for the candidate's
    (seen on the H200: 'subproc_worker_timer' started during the check stage)."""
    env = without_secrets()
    env.pop("TRITON_INTERPRET", None)
    if device == "interpret":
        env.update(interpreter.ENV)
    env["PYTHONUNBUFFERED"] = "1"
    env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    return env


def spec_ops(task_spec: str) -> str:
    """The policy on library ops a task spec names (`problem.py?ops=partial`); 'strict' otherwise."""
    options = dict(part.partition("=")[::2] for part in task_spec.partition("?")[2].split("&") if part)
    return options.get("ops", "strict")


class Evaluator:
    """Scores candidates for one task on one device; each evaluation in a fresh child process.

    `prewarm`: keep the next worker process started and set up (worker_process.py) while the caller is busy, so
    the next evaluation skips the start-up. Each worker imports while the evaluation before it runs and sets up
    once that one has finished timing. With `overlap` (default: on a GPU) two are kept ahead: the one after the next
    imports during one evaluation, sets up from its end, through the caller's turn and the next evaluation's compile
    and check, and that evaluation's timing waits for it (`WorkerProcess.hold`): nothing is timed while another
    process sets up on the GPU, and no request waits for a set-up. (Under the interpreter the CPU is what is timed:
    there one is kept ahead.) `env`: extra environment for the workers (e.g. CUDA_VISIBLE_DEVICES
    pinning them to one GPU). `known`: a dict shared with other evaluators of the same task, filled with what a
    worker learned before any candidate ran in it (the reference's ops), so later workers need not record it
    again. `stop`: set it to kill the evaluation in progress (the run is ending). `worker` and `node` label every
    result (which GPU or CPU worker, which host). `hide`: folders the sandbox masks besides the home folder and
    /root (the runs folder)."""

    def __init__(self, task_spec: str, *, device: str, gpu: GpuProfile, config: EvalConfig | None = None,
                 prewarm: bool = False, env: dict[str, str] | None = None, known: dict | None = None,
                 stop: threading.Event | None = None, worker: str = "", node: str = "",
                 hide: tuple[Path, ...] = (), overlap: bool | None = None):
        if task_spec.partition("?")[0].endswith(".py"):  # the worker runs in a folder of its own
            from avo.tasks.kernelbench.spec import absolute_spec

            task_spec = absolute_spec(task_spec)
        self.task_spec = task_spec
        self.device = device
        self.gpu = gpu
        self.config = config or EvalConfig()
        self.prewarm, self.env, self.stop = prewarm, dict(env or {}), stop
        self.overlap = device != "interpret" if overlap is None else overlap
        self.known = known if known is not None else {}
        self.worker, self.node = worker, node
        self._spares: list[WorkerProcess] = []
        """The workers ahead, next first: set up or setting up, then (with `overlap`) one still importing."""
        self._task = None
        task_file = Path(task_spec.partition("?")[0])
        readable = (task_file,) if task_file.suffix == ".py" else ()  # the file alone, not what lies beside it
        self.sandboxed = sandbox.wanted(self.config.sandbox)
        self._wrap = functools.partial(sandbox.command, hide=hide, readable=readable) if self.sandboxed else None

    def evaluate(self, candidate_dir: Path) -> EvalResult:
        return self._spawn([Path(candidate_dir)], mode="evaluate")[0]

    def confirm(self, candidate_dir: Path, incumbent_dir: Path) -> tuple[EvalResult, EvalResult]:
        """Both re-run in one child, timed interleaved with each other and the library."""
        first, second = self._spawn([Path(candidate_dir), Path(incumbent_dir)], mode="confirm")
        return first, second

    def warm(self) -> None:
        """Start the next worker now (with `prewarm`), e.g. before the first evaluation."""
        if self.prewarm and not self._spares:
            self._spares.append(self._new_worker())

    def close(self) -> None:
        """Let the prepared workers go, if any."""
        spares, self._spares = self._spares, []
        for spare in spares:
            spare.discard()

    def suites(self) -> tuple[str, str]:
        """(check suite, bench suite or ''): under the interpreter only the tiny suite (fp16, interpreter-sized) is
        meaningful, so it is checked, and timed unless timing is off; a workload (the user's cases, which are the
        task's bench suite then) is timed there as anywhere."""
        cfg = self.config
        if self.device == "interpret":
            return "tiny", ("bench" if cfg.workload else "tiny") if cfg.bench_suite else ""
        return cfg.check_suite, cfg.bench_suite

    def limits(self) -> dict[str, float]:
        cfg = self.config
        return {"import": cfg.import_timeout_s, "check": cfg.check_timeout_s, "bench": cfg.bench_timeout_s,
                "done": DONE_GRACE_S}

    def setup(self) -> dict:
        """What a worker is told before its candidates are known (`worker.prepare`)."""
        check_suite, bench_suite = self.suites()
        return {"task": self.task_spec, "device": self.device, "gpu": self.gpu.name, "check_suite": check_suite,
                "bench_suite": bench_suite, "seed": self.config.seed, "config": self.config.model_dump(mode="json"),
                "forbidden": self.known.get("forbidden")}

    def request(self, candidate_dirs: list[Path], mode: str) -> dict:
        """What the worker is asked to do (`worker.run`'s request), less where it writes its result and progress."""
        return dict(self.setup(), mode=mode, candidates=[str(Path(p).resolve()) for p in candidate_dirs],
                    spawned_at=time.time())

    def _new_worker(self, gated: bool = False) -> WorkerProcess:
        return WorkerProcess(self.setup(), {**scrubbed_env(self.device), **self.env}, gated=gated, wrap=self._wrap)

    def _stopping(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def _take_worker(self) -> WorkerProcess:
        spare = self._spares.pop(0) if self._spares else None
        if spare is not None and self._set_up(spare):
            return spare
        if spare is not None:  # died while it waited or set up: nothing of it is used
            spare.discard()
        return self._new_worker()

    def _set_up(self, spare: WorkerProcess) -> bool:
        """Whether the prepared worker is alive with its set-up done, waited for (up to the import limit) where it
        was let go: one that died setting up (beside an evaluation that left the GPU short of memory, say) is
        replaced, never handed a candidate."""
        if not spare.released:
            return spare.alive()
        deadline = time.monotonic() + self.limits()["import"]
        while spare.alive() and not self._stopping() and time.monotonic() < deadline:
            if spare.ready(4 * POLL_S):
                return spare.alive()
        return False

    def _spawn(self, candidate_dirs: list[Path], mode: str) -> list[EvalResult]:
        started, requested = time.monotonic(), time.time()
        worker = self._take_worker()
        if self.prewarm and not self._stopping():
            # Two ahead once an earlier worker has reported the reference's ops (nothing left to learn from this one).
            ahead = 2 if self.overlap and "forbidden" in self.known else 1
            while len(self._spares) < ahead:
                self._spares.append(self._new_worker(gated=True))  # imports while this one runs
            setting_up = [spare for spare in self._spares if spare.released]
            if setting_up:  # let go when the evaluation before this one ended: this one's timing waits for them
                limits = self.limits()
                worker.hold = _setting_up(setting_up, min(limits["import"], limits["check"] / 2))
        try:
            worker.start({"mode": mode, "candidates": [str(Path(p).resolve()) for p in candidate_dirs],
                          "requested_at": requested})
            try:
                timed_out = self._watch(worker)
            finally:
                procs.kill_group(worker.proc)
            known = worker.known()
            if known and known.get("forbidden") is not None and "forbidden" not in self.known:
                self.known["forbidden"] = known["forbidden"]
            results = self._collect(worker, timed_out, len(candidate_dirs))
        finally:
            worker.discard()
        if self._stopping():
            self.close()
        for spare in self._spares:  # set up now that this one has left the GPU, told what it learned
            spare.release(self.known)
        wall = round(time.monotonic() - started, 3)
        for r in results:
            r.wall_s, r.worker, r.node = wall, self.worker, self.node
        return results

    def _watch(self, worker: WorkerProcess) -> tuple[str, str, float] | None:
        """Polls until the child exits, reading its result channel; (stage, case, limit) if it overstayed a stage
        and was killed."""
        proc, progress = worker.proc, worker.progress_path
        limits = self.limits()
        stage, case, group, key = "start", "", "import", ("import", "0")
        group_started = polled = time.monotonic()
        while proc.poll() is None:
            now = time.monotonic()
            if worker.holding:  # its check verdicts waited on the spare's set-up: not the candidate's time
                group_started += now - polled
            polled = now
            if self._stopping():
                procs.kill_group(proc)
                return None
            marks = progress.read_text(errors="replace").splitlines()
            if marks:
                mark, mark_case, who = (marks[-1].split("\t") + ["", "", ""])[:3]
                if mark in STAGE_GROUP:
                    stage, case, group = mark, mark_case, STAGE_GROUP[mark]
                    if (group, who) != key:  # a new stage group, or the next candidate's: its own limit
                        key, group_started = (group, who), time.monotonic()
            if time.monotonic() - group_started > limits[group]:
                procs.kill_group(proc)
                return stage, case, limits[group]
            worker.poll_channel(POLL_S)
        return None

    def _collect(self, worker: WorkerProcess, timed_out, count: int) -> list[EvalResult]:
        if timed_out is not None:
            stage, case, limit = timed_out
            group = STAGE_GROUP.get(stage, "import")
            what = {"import": "importing the candidate and compiling its first launch", "check": "the check suite",
                    "bench": "the bench suite", "done": "exiting"}[group]
            where = f" (stage {stage}" + (f", case {case})" if case else ")")
            message = (f"{what} did not finish within {limit:g} s{where}: an endless loop, a deadlock, or a kernel "
                       "far slower than it should be")
            rule = f"stage.{group if group != 'done' else 'bench'}"
            return [self._failure("timeout", rule, message) for _ in range(count)]
        sent = worker.channel_results()
        if isinstance(sent, str):
            message = f"the result was not written by the evaluator (forged): {sent}"
            return [self._failure("rejected", "runtime.file_access", message) for _ in range(count)]
        try:
            results = [EvalResult.model_validate(r) for r in sent or []]
        except ValueError:
            results = []
        if len(results) != count:  # none, or not the ones asked for: the child died before it could send them
            return [self._crash(worker) for _ in range(count)]
        worker.judge.apply(results, self.suites()[0])  # the check suite as judged here, not as the worker says
        for r in results:
            why = impossible(r, self.task(), self.gpu, self.suites()[1]) if r.timing_source == "gpu" else None
            if why:
                r.status, r.rule, r.fitness, r.message = "rejected", "plausibility.peak", 0.0, why
        return results

    def task(self):
        """The task, loaded here on first use (the parent's own check of a result needs its cases' FLOPs and
        bytes)."""
        if self._task is None:
            from avo import tasks

            self._task = tasks.load(self.task_spec)
        return self._task

    def _crash(self, worker: WorkerProcess) -> EvalResult:
        code = worker.proc.returncode
        if code is not None and self.sandboxed and code > 128:
            code = 128 - code  # bwrap exits 128 + N for a worker killed by signal N
        if code is not None and code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with code {code} without a result"
        marks = worker.progress_path.read_text(errors="replace").splitlines()
        stage, case = ((marks[-1].split("\t") + ["", ""])[:2]) if marks else ("start", "")
        where = f" during stage {stage}" + (f", case {case}" if case else "")
        if self._stopping():
            how, where = "was stopped: the run is ending", ""
        tail = worker.stderr_tail(STDERR_TAIL)
        message = f"the evaluation process {how}{where}" + (f"\n{procs.STDERR_MARK}\n{tail}" if tail else "")
        return self._failure("crash", "crash", message)

    def _failure(self, status: str, rule: str, message: str) -> EvalResult:
        return EvalResult(status=status, rule=rule, message=message, device=self.device, gpu=self.gpu.name,
                          ops=spec_ops(self.task_spec))


def _setting_up(spares: list[WorkerProcess], limit_s: float):
    """A `WorkerProcess.hold` for the evaluation the spares set up beside: true while one of them is alive and not
    yet set up, for at most `limit_s` (a set-up that hangs costs that candidate no more)."""
    deadline = time.monotonic() + limit_s
    return lambda: time.monotonic() < deadline and any(s.alive() and not s.ready() for s in spares)


def evaluate(candidate_dir: Path, task_spec: str, *, device: str, gpu: GpuProfile,
             config: EvalConfig | None = None) -> EvalResult:
    """One evaluation with a throwaway Evaluator."""
    return Evaluator(task_spec, device=device, gpu=gpu, config=config).evaluate(Path(candidate_dir))
