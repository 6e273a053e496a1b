"""`avo evolve`: create (or resume) a run, score the seed as the baseline, and let the agent loop run."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Optional

import typer

from avo.errors import UserError
from avo.seed_target import check_seed_for_gpu

FIXED_ON_RESUME = ("kernel", "gpu", "device", "seed_kernel")


def load_task(spec: str):
    from avo import tasks

    return tasks.load(spec)


def make_evaluator(task_spec: str, *, device: str, gpu, config, pool=None):
    """The run's evaluation pool (evaluate/pool.py): one worker unless --gpus, --workers or --cluster ask for more."""
    from avo.config import PoolConfig
    from avo.evaluate.pool import make_pool

    return make_pool(task_spec, device=device, gpu=gpu, config=config, pool=pool or PoolConfig())


def closing(evaluator):
    """Ends the pool's workers when the run ends (an evaluator without `close` needs nothing)."""
    from contextlib import closing as closes, nullcontext

    return closes(evaluator) if hasattr(evaluator, "close") else nullcontext()


def seed_folder(value: str | None, task) -> Path:
    """`--seed-kernel` as a folder: a path, or a name beside the task's shipped seed (`triton_naive`, `gemm/x`)."""
    default = Path(task.default_seed())
    if value is None:
        found = default
    else:
        options = [Path(value), default.parent / value, default.parent.parent / value]
        found = next((p for p in options if p.is_dir()), Path(value))
    if not (found / "kernel.py").is_file():
        raise UserError(f"seed kernel folder {found} has no kernel.py: give a folder holding the task's kernel.py")
    return found


def evolve(*, overrides: dict, config_file: str | None, resume: str | None, quiet: bool, out=None,
           ops: str | None = None, run_id: str | None = None) -> int:
    from avo.agent import context
    from avo.agent.live import RunView
    from avo.agent.loop import Agent
    from avo.agent.models.factory import make_model
    from avo.agent.models.retry import RetryPolicy
    from avo.agent.toolbase import ToolContext, collect
    from avo.config import RunConfig
    from avo.gpus import resolve
    from avo.run import Run

    out = out or sys.stdout
    say = lambda line: print(line, file=out, flush=True)  # noqa: E731
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
        kept = {k: v for k, v in overrides.items() if k.startswith(("budget.", "agent.", "pool.")) and v is not None}
        config = RunConfig.load(None, {**flatten(run.config.model_dump()), **kept})
    gpu = resolve(config.gpu, config.device)
    if config.kernel.partition("?")[0].endswith(".py"):  # a task file: stored absolute, so --resume works anywhere
        from avo.tasks.kernelbench import absolute_spec

        config.kernel = absolute_spec(config.kernel)
    if ops is not None:
        from avo.tasks.kernelbench import with_options

        config.kernel = with_options(config.kernel, ops=ops)
    task = load_task(config.kernel)
    if hasattr(task, "preflight"):
        task.preflight(config.device)
    seed_dir = seed_folder(config.seed_kernel, task)
    if run is None:
        check_seed_for_gpu(seed_dir, gpu)
        check_seed_for_agent(config.agent, seed_dir)
    if config.agent.kind == "replay" and config.agent.replay_from:
        config.agent.replay_from = str(transcript_of(config.agent.replay_from, Path(config.runs_dir)))
    model = make_model(config.agent, seed=config.seed, policy=RetryPolicy(), say=say)
    # Before any run exists, so a bad --gpus or --cluster is refused in one line; its workers start setting up.
    evaluator = make_evaluator(config.kernel, device=config.device, gpu=gpu, config=config.evaluation,
                               pool=config.pool)
    if run is None:
        run = Run.create(config, runs_dir=Path(config.runs_dir), gpu=gpu.name, agent=model.name, run_id=run_id)
        policy = f", ops={task.ops}" if hasattr(task, "ops") else ""
        say(f"run {run.id}: {task.name} on {gpu.name} ({config.device}){policy}, {run.path}")
    else:
        say(f"resuming run {run.id}")
        if run.dropped_settings:
            say(f"settings this avo no longer has were ignored: {', '.join(run.dropped_settings)}")
    with run.lock(), closing(evaluator):
        run.recover_held_eval()  # a result scored and committed, but killed before it was filed
        run.set_state("running")
        lineage = run.lineage
        ctx = ToolContext(workspace=run.workspace, task_spec=config.kernel, device=config.device, gpu=gpu, run=run,
                          lineage=lineage, evaluator=evaluator, config=config, state={"model": model.name})
        tools = collect(lambda tool: tool.name != "shell" or config.agent.allow_shell)
        workers, where = getattr(evaluator, "size", 1), getattr(evaluator, "where", "")
        situation = context.Situation(task=task, gpu=gpu, device=config.device, config=config, workers=workers,
                                      where=where)
        title = f"avo {run.id} · {task.name} · {gpu.name}" + (" · interpreter" if config.device == "interpret" else "")
        title += f" · {workers} workers ({where})" if workers > 1 else ""
        view = RunView(title=title, hours=config.budget.hours, max_candidates=config.budget.max_candidates,
                       quiet=quiet, out=out)
        agent = Agent(run=run, model=model, tools=tools, ctx=ctx, situation=situation, view=view)
        if len(lineage) == 0 or not any(e.get("kind") == "baseline" for e in run.events()):  # or killed before
            # the seed was tagged, accepted and recorded: baseline() finishes it from the seed's commit
            say(f"evaluating the seed {seed_dir} as the baseline ...")
            cid, result = baseline(run, evaluator, seed_dir)
            say(f"baseline {cid}: {result.summary()}")
            if not result.ok:
                failure = seed_failure(result, seed_dir, config.kernel, run.id, config.device)
                run.set_state("failed", reason=failure)
                raise UserError(failure)
            ctx.state.update(parent=cid, candidates=0, since_improvement=0)
            agent.begin(context.start_message(f"{cid}: {result.summary()}"
                                              + ("" if result.ok else f"\n{result.message[:2000]}")))
        else:
            agent.resume()
        view.set_best(lineage.best, run.load_eval(lineage.best) if lineage.best else None)
        with view:
            reason = agent.run()
    best = lineage.best
    best_result = run.load_eval(best) if best else None
    base_result = run.load_eval(lineage.baseline) if lineage.baseline else None
    say(f"run {run.id}: {reason}")
    if best_result is not None:
        versus = f" (baseline {lineage.baseline}: {base_result.fitness:.4g})" if base_result is not None else ""
        say(f"best {best}: fitness {best_result.fitness:.4g}{versus}; {best_result.summary()}")
    else:
        say("no correct candidate yet")
    where = "" if config.runs_dir == "runs" else f" --runs-dir {config.runs_dir}"
    say(f"look: avo show {run.id}{where} · avo diff best baseline --run {run.id}{where} · {run.path}")
    if run.info().get("state") == "stopped":
        say(f"continue with: avo evolve --resume {run.id}{where}")
        return 130
    return 0


def baseline(run, evaluator, seed_dir: Path):
    """Copy the seed into the workspace, score it, commit it and tag it `baseline` (and `best` when correct).
    A run killed after the seed's commit but before its `baseline` event finishes here on resume, from that commit
    (tagging and accepting again are harmless)."""
    lineage = run.lineage
    first = lineage.cids()[0] if len(lineage) else None
    if run.workspace.exists():
        shutil.rmtree(run.workspace)
    if first is None:
        shutil.copytree(seed_dir, run.workspace, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    else:
        lineage.checkout(first, run.workspace)
    result = (run.load_eval(first) if first else None) or evaluator.evaluate(run.workspace)
    run.hold_eval(result)
    cid = first or lineage.commit(run.workspace, parent=None, result=result, model="seed",
                                  rationale=f"baseline: the seed kernel {seed_dir}")
    run.save_eval(cid, result)
    lineage.tag_baseline(cid)
    if result.ok:
        lineage.accept(cid)
    run.append_event("baseline", cid=cid, seed=str(seed_dir), summary=result.summary(), status=result.status,
                     fitness=result.fitness, workspace_parent=cid)
    return cid, result


def check_seed_for_agent(agent, seed_dir: Path) -> None:
    """UserError before any run exists when the agent can do nothing with the seed: the heuristic agent only moves
    `# avo: tune` knobs."""
    from avo.agent.heuristic.knobs import KnobError, parse_knobs
    from avo.agent.models.factory import resolve_kind

    if resolve_kind(agent)[0] != "heuristic":
        return
    try:
        knobs = parse_knobs((seed_dir / "kernel.py").read_text(errors="replace"))
    except KnobError:
        knobs = []
    if not knobs:
        raise UserError(f"the heuristic agent only tunes `# avo: tune` knobs and {seed_dir / 'kernel.py'} has none: "
                        "give --seed-kernel a folder whose kernel.py marks its tunable constants (e.g. "
                        "`BLOCK = 128  # avo: tune 64 128 256`), or use an LLM agent (--agent anthropic with "
                        "ANTHROPIC_API_KEY set, or --agent openai --base-url URL)")


def seed_failure(result, seed_dir: Path, spec: str, run_id: str, device: str) -> str:
    """One line for a seed that is not correct: every variant of it would fail the same way, so nothing is evolved."""
    what = {"rejected": "a guard", "incorrect": "the check suite"}.get(result.status, f"evaluation ({result.status})")
    text = result.message.strip().splitlines()[0] if result.message.strip() else ""
    rule = "" if not result.rule or text.startswith(result.rule) else f"{result.rule}: "
    where = " --device interpret" if device == "interpret" else ""
    return (f"the seed {seed_dir} failed {what}: {rule}{text[:400]}; run {run_id} stopped before any candidate: "
            f"fix the seed and check it with: avo bench {seed_dir} --kernel '{spec}'{where}")


def transcript_of(ref: str, runs_dir: Path) -> Path:
    path = Path(ref)
    if path.is_file():
        return path
    if (path / "transcript.jsonl").is_file():
        return path / "transcript.jsonl"
    from avo.run import Run

    return Run.open(ref, runs_dir).path / "transcript.jsonl"


def flatten(data: dict, prefix: str = "") -> dict:
    """{"budget": {"hours": 1}} -> {"budget.hours": 1}, the shape RunConfig.load takes as overrides."""
    flat = {}
    for key, value in data.items():
        if isinstance(value, dict) and key != "prices_usd_per_mtok":
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def register(app: typer.Typer) -> None:
    @app.command("evolve")
    def evolve_command(
        kernel: Optional[str] = typer.Option(None, "--kernel", help="attention, gemm, a KernelBench .py file, or a "
                                             "folder of them (one run per problem)."),
        gpu: Optional[str] = typer.Option(None, "--gpu", help="auto, h100, h200 or b200."),
        hours: Optional[float] = typer.Option(None, "--hours", help="Time budget in hours."),
        max_candidates: Optional[int] = typer.Option(None, "--max-candidates", help="Stop after this many candidates."),
        max_cost: Optional[float] = typer.Option(None, "--max-cost", help="Stop once the model cost this many USD."),
        agent: Optional[str] = typer.Option(None, "--agent", help="auto, anthropic, openai, heuristic or replay."),
        model: Optional[str] = typer.Option(None, "--model", help="Model name for the anthropic/openai backends."),
        base_url: Optional[str] = typer.Option(None, "--base-url", help="API base URL (OpenAI-compatible server)."),
        replay_from: Optional[str] = typer.Option(None, "--replay-from", help="Run or transcript to replay."),
        seed_kernel: Optional[str] = typer.Option(None, "--seed-kernel", help="Starting kernel folder."),
        seed: Optional[int] = typer.Option(None, "--seed", help="Seed of the agent's own choices."),
        resume: Optional[str] = typer.Option(None, "--resume", help="Continue a stopped run (id, path or latest)."),
        device: Optional[str] = typer.Option(None, "--device", help="cuda, or interpret (Triton interpreter on CPU)."),
        config: Optional[str] = typer.Option(None, "--config", help="YAML run configuration."),
        runs_dir: Optional[str] = typer.Option(None, "--runs-dir", help="Where runs are stored (default: runs)."),
        allow_shell: bool = typer.Option(False, "--allow-shell", help="Give the agent a shell tool in the workspace."),
        gpus: Optional[str] = typer.Option(None, "--gpus", help="GPUs to evaluate on, one worker each: 0,1,2,3 or "
                                           "all (default: the first GPU)."),
        workers: Optional[int] = typer.Option(None, "--workers", help="Interpreter CPU workers (--device interpret);"
                                              " with --cluster, Ray tasks at once."),
        cluster: Optional[str] = typer.Option(None, "--cluster", help="ray (the Ray cluster of this machine) or "
                                              "ray://host:port: evaluations run as Ray tasks, one GPU each."),
        quiet: bool = typer.Option(False, "--quiet", help="Plain log lines instead of the live dashboard."),
        ops: Optional[str] = typer.Option(None, "--ops", help="KernelBench tasks: strict (default: every compute op "
                                          "is the candidate's own) or partial (torch ops allowed for the parts it "
                                          "does not replace)."),
        hours_per_problem: Optional[float] = typer.Option(None, "--hours-per-problem", help="With --kernel DIR: "
                                                          "the time budget of each problem's run."),
        sweep_id: Optional[str] = typer.Option(None, "--sweep-id", help="With --kernel DIR: the runs' id prefix "
                                               "(default: the folder's name); the same id again resumes."),
    ) -> None:
        """Evolve a kernel: the agent edits, the evaluator scores, the lineage keeps every candidate."""
        overrides = {
            "kernel": kernel, "gpu": gpu, "device": device, "seed_kernel": seed_kernel, "seed": seed,
            "runs_dir": runs_dir, "budget.hours": hours, "budget.max_candidates": max_candidates,
            "budget.max_cost": max_cost, "agent.kind": agent, "agent.model": model, "agent.base_url": base_url,
            "agent.replay_from": replay_from, "agent.allow_shell": True if allow_shell else None,
            "pool.gpus": gpus, "pool.workers": workers, "pool.cluster": cluster,
        }
        if replay_from is not None and agent is None:
            overrides["agent.kind"] = "replay"
        if kernel is not None and Path(kernel).is_dir():
            from avo.commands.evolve_folder import evolve_folder

            if resume is not None:
                raise UserError("with --kernel DIR, run the same command again to resume (no --resume)")
            raise typer.Exit(evolve_folder(Path(kernel), overrides=overrides, config_file=config, quiet=quiet,
                                           ops=ops, hours_per_problem=hours_per_problem if hours_per_problem
                                           is not None else 1.0, sweep_id=sweep_id))
        if hours_per_problem is not None or sweep_id is not None:
            raise UserError("--hours-per-problem and --sweep-id go with --kernel DIR, a folder of problem files")
        raise typer.Exit(evolve(overrides=overrides, config_file=config, resume=resume, quiet=quiet, ops=ops))
