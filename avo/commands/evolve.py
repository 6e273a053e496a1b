"""`avo evolve`: flags in, a session driven (avo/agent/session.py), how the run ended printed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from avo.errors import UserError


def evolve(*, overrides: dict, config_file: str | None, resume: str | None, quiet: bool, out=None,
           ops: str | None = None, run_id: str | None = None) -> int:
    """The command's work: settle the configuration, wire the session, drive it, say how it ended."""
    from avo.agent.session import Session, closing, settle

    out = out or sys.stdout
    say = lambda line: print(line, file=out, flush=True)  # noqa: E731
    settled = settle(overrides, config_file, resume, ops)
    session = Session.from_config(settled.config, settled.gpu, resuming=settled.run is not None, say=say)
    with closing(session.evaluator):  # its workers start setting up at once: they go even if no run opens
        run = session.open(settled.run, run_id=run_id)
        reason = session.drive(run, quiet=quiet, out=out)
    return summarize(run, reason, session.config.runs_dir, say)


def summarize(run, reason: str, runs_dir: str, say) -> int:
    """The run's last lines (why it stopped, its best, where to look) and the exit code: 130 when resumable."""
    lineage = run.lineage
    best = lineage.best
    best_result = run.load_eval(best) if best else None
    base_result = run.load_eval(lineage.baseline) if lineage.baseline else None
    say(f"run {run.id}: {reason}")
    if best_result is not None:
        versus = f" (baseline {lineage.baseline}: {base_result.fitness:.4g})" if base_result is not None else ""
        say(f"best {best}: fitness {best_result.fitness:.4g}{versus}; {best_result.summary()}")
    else:
        say("no correct candidate yet")
    where = "" if runs_dir == "runs" else f" --runs-dir {runs_dir}"
    say(f"look: avo show {run.id}{where} · avo diff best baseline --run {run.id}{where} · {run.path}")
    if run.info().get("state") == "stopped":
        say(f"continue with: avo evolve --resume {run.id}{where}")
        return 130
    return 0


def workload_override(kernel: str | None, config_file: str | None, resume: str | None, **flags) -> dict | None:
    """The workload the flags give, as the run's `evaluation.workload` setting (None: no workload flag). A resumed
    run keeps the workload it was started with."""
    if not any(v is not None and v != [] for v in flags.values()):
        return None
    if resume is not None:
        raise UserError("--shapes, --workload, --model config.json, --tokens and --batch cannot change when resuming: "
                        "the run keeps its workload")
    from avo.config import RunConfig
    from avo.tasks.workload import from_flags

    task = kernel if kernel is not None else RunConfig.load(config_file).kernel
    return from_flags(task, **flags).model_dump(mode="json")


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
        model: Optional[str] = typer.Option(None, "--model", help="Model name for the anthropic/openai backends; "
                                            "a Hugging Face config.json (a path ending in .json) instead gives the "
                                            "workload: that model's shapes at --tokens."),
        base_url: Optional[str] = typer.Option(None, "--base-url", help="API base URL (OpenAI-compatible server)."),
        replay_from: Optional[str] = typer.Option(None, "--replay-from", help="Run or transcript to replay."),
        seed_kernel: Optional[str] = typer.Option(None, "--seed-kernel", help="Starting kernel folder."),
        seed: Optional[int] = typer.Option(None, "--seed", help="Seed of the agent's own choices."),
        resume: Optional[str] = typer.Option(None, "--resume", help="Continue a stopped run (id, path or latest)."),
        device: Optional[str] = typer.Option(None, "--device", help="cuda, or interpret (Triton interpreter on CPU)."),
        config: Optional[str] = typer.Option(None, "--config", help="YAML run configuration."),
        runs_dir: Optional[str] = typer.Option(None, "--runs-dir", help="Where runs are stored (default: runs)."),
        allow_shell: bool = typer.Option(False, "--allow-shell", help="Give the agent a shell tool in the workspace."),
        no_sandbox: bool = typer.Option(False, "--no-sandbox", help="Run candidates and the shell outside the OS "
                                        "sandbox (bubblewrap), with your user's rights; recorded in run.json."),
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
        shapes: Optional[list[str]] = typer.Option(None, "--shapes", help="A case to time instead of the bench "
                                                   "suite (repeatable): B=8,Hq=32,Hkv=8,S=2048,D=128,causal or "
                                                   "M=512,N=6144,K=4096, optional weight=2 and fp16."),
        workload: Optional[str] = typer.Option(None, "--workload", help="YAML file of the cases to time instead "
                                               "of the bench suite (name: ..., cases: [...])."),
        tokens: Optional[str] = typer.Option(None, "--tokens", help="With --model config.json: token counts, "
                                             "e.g. 2048,8192."),
        batch: Optional[int] = typer.Option(None, "--batch", help="With --model config.json and --kernel "
                                            "attention: sequences per case (default 1)."),
    ) -> None:
        """Evolve a kernel: the agent edits, the evaluator scores, the lineage keeps every candidate."""
        evolve_from_flags(**locals())  # every flag above, by name


def evolve_from_flags(*, kernel, gpu, hours, max_candidates, max_cost, agent, model, base_url, replay_from, seed_kernel,
                      seed, resume, device, config, runs_dir, allow_shell, no_sandbox, gpus, workers, cluster, quiet,
                      ops, hours_per_problem, sweep_id, shapes, workload, tokens, batch) -> None:
    """What `avo evolve` does with its flags: one run (new or resumed), or a run per problem of a folder."""
    overrides = {
        "kernel": kernel, "gpu": gpu, "device": device, "seed_kernel": seed_kernel, "seed": seed,
        "runs_dir": runs_dir, "budget.hours": hours, "budget.max_candidates": max_candidates,
        "budget.max_cost": max_cost, "agent.kind": agent, "agent.model": model, "agent.base_url": base_url,
        "agent.replay_from": replay_from, "agent.allow_shell": True if allow_shell else None,
        "evaluation.sandbox": "off" if no_sandbox else None,
        "pool.gpus": gpus, "pool.workers": workers, "pool.cluster": cluster,
    }
    if replay_from is not None and agent is None:
        overrides["agent.kind"] = "replay"
    model_config = model if model is not None and model.endswith(".json") else None
    if model_config is not None:
        overrides["agent.model"] = None
    overrides["evaluation.workload"] = workload_override(
        kernel, config, resume, shapes=shapes, workload=workload, model=model_config, tokens=tokens, batch=batch)
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
