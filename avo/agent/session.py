"""A run's wiring: the task, the evaluator and the model meet the run directory, the tools and the loop.

`settle` turns flags into the run's configuration: a new run's flags over the config file, or a resumed run's
recorded settings with only budget and agent flags applied. `Session.from_config` builds the real task, evaluator
and model for it; a test builds a `Session` from a fake task, a fake evaluator and a scripted model instead.
`open` creates the run directory (or takes the resumed one); `drive` scores the seed as the baseline of a new run
(or picks a stopped one up where it was) and runs the loop under the run's lock, returning why it stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TextIO

from avo import tasks
from avo.agent import context
from avo.agent.controls import Controls
from avo.agent.live import RunView
from avo.agent.loop import Agent
from avo.agent.models.factory import make_model, resolve_kind
from avo.agent.seed import baseline, check_seed_for_agent, seed_failure, seed_folder
from avo.agent.tools.base import LoopState, ToolContext, collect
from avo.config import RunConfig, flatten, resumable
from avo.errors import UserError
from avo.evaluate import sandbox
from avo.gpus import resolve
from avo.run.directory import Run
from avo.seed_target import check_seed_for_gpu, machine_default_seed

if TYPE_CHECKING:
    from avo.agent.models.base import Model
    from avo.evaluate import Evaluator
    from avo.gpus import GpuProfile
    from avo.tasks.base import Task

FIXED_ON_RESUME = ("kernel", "gpu", "device", "seed_kernel")


class Settled(NamedTuple):
    config: RunConfig
    gpu: GpuProfile
    run: Run | None
    """The run to resume; None for a new one."""


def settle(overrides: dict, config_file: str | None = None, resume: str | None = None,
           ops: str | None = None) -> Settled:
    """The run's configuration and GPU from flags (`overrides`: dotted keys, None where a flag was not given)."""
    config = RunConfig.load(config_file, overrides)
    run = None
    if resume is not None:
        run = Run.open(resume, Path(config.runs_dir))
        changed = [k for k in FIXED_ON_RESUME
                   if overrides.get(k) is not None and overrides[k] != getattr(run.config, k)]
        if ops is not None:
            changed.insert(0, "ops")
        if changed:
            raise UserError(f"--{changed[0].replace('_', '-')} cannot change when resuming run {run.id}")
        config = RunConfig.load(None, {**flatten(run.config), **resumable(overrides)})
    tasks.check_spec(config.kernel)  # a bad --kernel is named before a missing GPU is
    gpu = resolve(config.gpu, config.device)
    if config.kernel.partition("?")[0].endswith(".py"):  # a task file: stored absolute, so --resume works anywhere
        from avo.tasks.kernelbench.spec import absolute_spec

        config.kernel = absolute_spec(config.kernel)
    if ops is not None:
        from avo.tasks.kernelbench.spec import with_options

        config.kernel = with_options(config.kernel, ops=ops)
    return Settled(config, gpu, run)


LLM_AGENTS = ("anthropic", "openai")
"""Agents whose candidates are code a language model wrote: they run only inside the sandbox, or with --no-sandbox."""


def settle_sandbox(config: RunConfig, say: Callable[[str], None]) -> None:
    """Decide whether this run's evaluations and shell are sandboxed, and record it (`evaluation.sandbox` becomes
    `on` or `off` in run.json): an LLM agent's run without a sandbox is refused in one line unless it is `off`
    (`--no-sandbox`); the heuristic agent's, which only moves knobs of existing kernels, goes on with a warning."""
    evaluation = config.evaluation
    if evaluation.sandbox == "off":
        say("no sandbox (--no-sandbox): candidates and the shell run unconfined, with this user's rights")
        return
    why = sandbox.why_unavailable()
    if why is None:
        evaluation.sandbox = "on"
        return
    kind = resolve_kind(config.agent)[0]
    if evaluation.sandbox == "on" or kind in LLM_AGENTS:
        raise UserError(f"no sandbox for the {kind} agent's code: {why} ({sandbox.INSTALL}); --no-sandbox runs it "
                        "unconfined")
    say(f"warning: no sandbox ({why}): candidates run unconfined; {sandbox.INSTALL}")
    evaluation.sandbox = "off"


def transcript_of(ref: str, runs_dir: Path) -> Path:
    """The transcript `--replay-from` names: a transcript file, a run directory, or a run id."""
    path = Path(ref)
    if path.is_file():
        return path
    if (path / "transcript.jsonl").is_file():
        return path / "transcript.jsonl"
    return Run.open(ref, runs_dir).path / "transcript.jsonl"


def _say(line: str) -> None:
    print(line, flush=True)


@dataclass
class Session:
    config: RunConfig
    task: Task
    gpu: GpuProfile
    evaluator: Evaluator
    model: Model
    seed_dir: Path
    controls: Controls = field(default_factory=Controls)
    """Shared by the loop and the model's retry policy (built from it by `from_config`)."""
    say: Callable[[str], None] = _say
    """Where progress lines go (the command prints them)."""

    @classmethod
    def from_config(cls, config: RunConfig, gpu: GpuProfile, *, resuming: bool = False,
                    say: Callable[[str], None] = _say) -> Session:
        """The task, evaluator and model `config` names; a new run's seed is checked against the GPU and agent."""
        from avo.cluster import make_pool

        task = tasks.load(config.kernel)
        seed_dir = seed_folder(config.seed_kernel, task, machine_default_seed(task, gpu, config.device))
        if not resuming:  # before the preflight, which sizes a KernelBench task (a minute for a level-3 model)
            check_seed_for_gpu(seed_dir, gpu)
            check_seed_for_agent(config.agent, seed_dir)
            config.seed_kernel = config.seed_kernel or str(seed_dir)  # the machine's default, kept for --resume
        if hasattr(task, "preflight"):
            task.preflight(config.device)
        if config.agent.kind == "replay" and config.agent.replay_from:
            config.agent.replay_from = str(transcript_of(config.agent.replay_from, Path(config.runs_dir)))
        controls = Controls()
        settle_sandbox(config, say)
        model = make_model(config.agent, seed=config.seed, policy=controls.retry_policy(), say=say)
        # Before any run exists, so a bad --gpus or --cluster is refused in one line; its workers start setting up.
        evaluator = make_pool(config.kernel, device=config.device, gpu=gpu, config=config.evaluation,
                              pool=config.pool, hide=(Path(config.runs_dir),))
        return cls(config=config, task=task, gpu=gpu, evaluator=evaluator, model=model, seed_dir=seed_dir,
                   controls=controls, say=say)

    def open(self, run: Run | None = None, run_id: str | None = None) -> Run:
        """A new run directory for this session (or `run`, being resumed), announced in one line."""
        if run is not None:
            self.say(f"resuming run {run.id}")
            if run.dropped_settings:
                self.say(f"settings this avo no longer has were ignored: {', '.join(run.dropped_settings)}")
            return run
        config = self.config
        run = Run.create(config, runs_dir=Path(config.runs_dir), gpu=self.gpu.name, agent=self.model.name,
                         run_id=run_id)
        policy = f", ops={self.task.ops}" if hasattr(self.task, "ops") else ""
        self.say(f"run {run.id}: {self.task.name} on {self.gpu.name} ({config.device}){policy}, {run.path}")
        return run

    def drive(self, run: Run, *, quiet: bool = False, out: TextIO | None = None) -> str:
        """Baseline (for a new run) and the loop, under the run's lock; returns why the loop stopped. The caller
        closes the evaluator (`avo evolve` does, even when no run opens)."""
        config = self.config
        with run.lock():
            run.recover_held_eval()  # a result scored and committed, but killed before it was filed
            run.set_state("running")
            ctx = ToolContext(workspace=run.workspace, task_spec=config.kernel, device=config.device, gpu=self.gpu,
                              run=run, lineage=run.lineage, evaluator=self.evaluator, config=config,
                              state=LoopState(model=self.model.name))
            view = RunView(title=self.title(run), hours=config.budget.hours,
                           max_candidates=config.budget.max_candidates, quiet=quiet, out=out)
            agent = Agent(run=run, model=self.model, tools=collect(self.offered), ctx=ctx, view=view,
                          situation=context.Situation(task=self.task, gpu=self.gpu, device=config.device,
                                                      config=config, workers=self.workers, where=self.where),
                          controls=self.controls)
            if len(run.lineage) == 0 or not any(e.get("kind") == "baseline" for e in run.events()):
                self.start(run, agent)  # or killed before the seed was tagged, accepted and recorded
            else:
                agent.resume()
            best = run.lineage.best
            view.set_best(best, run.load_eval(best) if best else None)
            with view:
                return agent.run()

    def start(self, run: Run, agent: Agent) -> None:
        """Score the seed as the baseline (finished from the seed's commit if a kill cut it short) and open the
        conversation; a seed that is not correct stops the run at once."""
        self.say(f"evaluating the seed {self.seed_dir} as the baseline ...")
        cid, result = baseline(run, self.evaluator, self.seed_dir)
        self.say(f"baseline {cid}: {result.summary()}")
        if not result.ok:
            failure = seed_failure(result, self.seed_dir, self.config.kernel, run.id, self.config.device)
            run.set_state("failed", reason=failure)
            raise UserError(failure)
        agent.ctx.state.parent, agent.ctx.state.candidates, agent.ctx.state.since_improvement = cid, 0, 0
        agent.begin(context.start_message(f"{cid}: {result.summary()}"))

    def offered(self, tool) -> bool:
        """Every tool, but the shell only with --allow-shell."""
        return tool.name != "shell" or self.config.agent.allow_shell

    def title(self, run: Run) -> str:
        interpreted = " · interpreter" if self.config.device == "interpret" else ""
        pool = f" · {self.workers} workers ({self.where})" if self.workers > 1 else ""
        return f"avo {run.id} · {self.task.name} · {self.gpu.name}" + interpreted + pool

    @property
    def workers(self) -> int:
        return getattr(self.evaluator, "size", 1)

    @property
    def where(self) -> str:
        return getattr(self.evaluator, "where", "")


def closing(evaluator):
    """Ends the pool's workers when the run ends (an evaluator without `close` needs nothing)."""
    from contextlib import closing as closes, nullcontext

    return closes(evaluator) if hasattr(evaluator, "close") else nullcontext()
