"""Run configuration: one pydantic model per component, nested in RunConfig, loadable from YAML.

CLI flags override a YAML file only when the flag was given (see `RunConfig.load`). `extra="forbid"` everywhere, so a
typo in a YAML file is an error rather than a silently ignored key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from avo.errors import UserError, read_user_file
from avo.tasks.workload import Workload

Device = Literal["cuda", "interpret"]
CompileAhead = Literal["processes", "threads", "off"]
FLAGS = {"budget.hours": "--hours", "budget.max_candidates": "--max-candidates", "budget.max_cost": "--max-cost",
         "seed": "--seed", "device": "--device", "agent.kind": "--agent", "pool.workers": "--workers",
         "pool.gpus": "--gpus", "pool.cluster": "--cluster"}
"""The CLI flag that sets a config key, named in its error so a user knows which input was refused."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EvalConfig(_Strict):
    """How candidates are checked and timed."""

    import_timeout_s: float = 180.0
    """Limit for importing the candidate and compiling its first launch."""
    check_timeout_s: float = 300.0
    """Limit for the correctness stage (the `check` suite)."""
    bench_timeout_s: float = 900.0
    """Limit for the timing stage (the `bench` suite, library timed alongside)."""
    warmup_ms: float = 10.0
    warmup_calls: int = Field(default=1, ge=1)
    """Warm-up of each contender before a case's rounds: this long and this many calls at least. Each case has
    run once, checked, just before (compiles, autotuning and the library's plan are behind it), so the warm-up only
    absorbs first-call costs and sizes the rounds."""
    rep_ms: float = 100.0
    """Timed device time per contender and case, over at most 5 rounds (evaluate/worker/timing.py)."""
    min_rounds: int = Field(default=3, ge=2, le=5)
    target_error: float = Field(default=0.003, ge=0.0)
    """Timing of a case ends after `min_rounds` rounds once every candidate's speedup over the library has a
    relative standard error (from the per-round ratios) of at most this; 0 always times all 5 rounds."""
    launch_shield_us: float = Field(default=50.0, ge=0.0)
    """Device spin before each timed call's start event, so host launch work is not timed; a case whose contenders'
    launch work takes longer gets a longer one (evaluate/worker/timing.py); 0: none."""
    compile_ahead: CompileAhead = "processes"
    """Compile a Triton candidate's kernels for every case in parallel before the check stage
    (evaluate/worker/precompile.py), in forked processes or in threads of the worker; off, each compiles on its
    first launch, one after another. true and false (the earlier form) read as "processes" and "off"."""
    @field_validator("compile_ahead", mode="before")
    @classmethod
    def _compile_ahead_flag(cls, value: Any) -> Any:
        if value in get_args(CompileAhead):
            return value
        try:  # the earlier boolean form, as pydantic reads a bool (true/false, on/off, yes/no, 1/0)
            return "processes" if TypeAdapter(bool).validate_python(value) else "off"
        except ValidationError:
            return value  # refused as not one of the three

    input_sets: int = 3
    """Distinct input sets in rotation during timing, so no result can be cached by address or content."""
    seed: int | None = None
    """Seed for the check inputs; None draws a fresh one for every evaluation (and records it)."""
    bench_suite: str = "bench"
    """The timed suite: `bench` (the default), or `wide` (the shapes models run: head dim 64, short sequences, few
    tokens, long K; attention and gemm)."""
    check_suite: str = "check"
    sandbox: Literal["auto", "on", "off"] = "auto"
    """Run each evaluation worker and the shell tool inside the OS sandbox (bubblewrap; avo/evaluate/sandbox.py): `on`
    refuses to run without it, `off` runs them unconfined (`--no-sandbox`), `auto` sandboxes where bwrap works. A
    run with an LLM agent refuses to start without a sandbox unless it is `off`; a run records what it ran with."""
    workload: Workload | None = None
    """The user's own cases (`--shapes`, `--workload FILE.yaml`, `--model config.json --tokens ...`), timed instead
    of the bench suite, each with its weight in the fitness (avo/tasks/workload.py); None: the bench suite."""


class PoolConfig(_Strict):
    """Where candidates are evaluated, and how many at once (evaluate/pool.py). Acceptance does not change with it:
    a new best is always confirmed side by side with the old one in one process on one GPU."""

    gpus: str | None = None
    """GPUs of this machine to evaluate on, one worker each: '0,1,2,3' or 'all'. None: one worker, first GPU."""
    workers: int | None = Field(default=None, ge=1)
    """Interpreter CPU workers (`--device interpret`; default 1). With a cluster: Ray tasks at once (default: one
    per GPU of the cluster)."""
    cluster: str | None = None
    """'ray' (the Ray cluster this machine belongs to) or 'ray://host:port'; None: this machine only."""
    prewarm: bool = True
    """Keep each worker's next process started and set up for the task before its candidate arrives."""


class AgentConfig(_Strict):
    """Which model drives the loop and how."""

    kind: Literal["auto", "anthropic", "openai", "heuristic", "replay"] = "auto"
    model: str | None = None
    base_url: str | None = None
    replay_from: str | None = None
    """Transcript (or run directory) whose model turns the replay backend re-issues."""
    max_tokens: int = 8192
    context_limit_tokens: int = 150_000
    """Past this many tokens of conversation, the loop restarts it from a summary."""
    supervisor_after: int = 8
    """Evaluations without improvement after which a supervisor turn reviews the trajectory."""
    allow_shell: bool = False
    prices_usd_per_mtok: dict[str, tuple[float, float]] = Field(
        default_factory=lambda: {
            "claude-opus": (15.0, 75.0),
            "claude-sonnet": (3.0, 15.0),
            "claude-haiku": (1.0, 5.0),
        }
    )
    """(input, output) USD per million tokens, matched by model-name prefix; unknown models cost 0 and say so."""


class BudgetConfig(_Strict):
    """When a run stops. Checked in one place, the loop's budget check."""

    hours: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    """Finite: a run that may never end is asked for with a large number, e.g. 168 for a week."""
    max_candidates: int | None = Field(default=None, ge=1)
    max_cost: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """USD; stops the run once the model's cost reaches it."""


class RunConfig(_Strict):
    """Everything that defines a run; stored in the run's run.json."""

    kernel: str = "gemm"
    """Task: attention, gemm, or a path to a KernelBench-format file."""
    gpu: str = "auto"
    device: Device = "cuda"
    seed_kernel: str | None = None
    """Folder of the starting candidate; default: the task's shipped seed."""
    seed: int = 0
    """Seed of the agent's own choices (the heuristic agent is deterministic given it)."""
    runs_dir: str = "runs"
    evaluation: EvalConfig = Field(default_factory=EvalConfig)
    pool: PoolConfig = Field(default_factory=PoolConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> RunConfig:
        """YAML file (if any), then the overrides whose value is not None. Overrides use dotted keys: `budget.hours`."""
        data: dict[str, Any] = {}
        if path is not None:
            text = read_user_file(path, "config file", f"--config {path} is a folder: give a YAML file")
            try:
                data = yaml.safe_load(text) or {}
            except yaml.YAMLError as exc:
                raise UserError(f"config file {path} is not valid YAML: {str(exc).splitlines()[0]}") from None
            if not isinstance(data, dict):
                raise UserError(f"config file {path} must hold a mapping at the top level")
        for dotted, value in (overrides or {}).items():
            if value is None:
                continue
            node = data
            *parents, leaf = dotted.split(".")
            for key in parents:
                node = node.setdefault(key, {})
            node[leaf] = value
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            flag = f" ({FLAGS[where]})" if where in FLAGS else ""
            raise UserError(f"bad configuration at '{where}'{flag}: {first['msg']}") from None


def stored_run_config(data: dict) -> tuple[RunConfig, list[str]]:
    """The config in a run's run.json, as written by this avo or an older one: settings this version no longer
    has are dropped and named (a user's YAML, by contrast, is strict: a misspelt key is an error)."""
    dropped: list[str] = []

    def known(model: type[BaseModel], values: dict, prefix: str) -> dict:
        kept = {}
        for key, value in values.items():
            field = model.model_fields.get(key)
            if field is None:
                dropped.append(prefix + key)
                continue
            sub = field.annotation
            if isinstance(value, dict) and isinstance(sub, type) and issubclass(sub, BaseModel):
                value = known(sub, value, f"{prefix}{key}.")
            kept[key] = value
        return kept

    return RunConfig.model_validate(known(RunConfig, dict(data), "")), dropped


RESUMABLE = ("budget.", "agent.", "pool.", "evaluation.sandbox")
"""Prefixes of the settings a resumed run takes from the command line; the rest is the run's recorded config."""


def resumable(overrides: dict) -> dict:
    """The overrides a resumed run takes: those given (not None) under RESUMABLE."""
    return {k: v for k, v in overrides.items() if k.startswith(RESUMABLE) and v is not None}


def flatten(model: BaseModel, prefix: str = "", mode: str = "python") -> dict:
    """RunConfig(budget=Budget(hours=1)) -> {"budget.hours": 1, ...}, the shape RunConfig.load takes as overrides:
    sub-configs are walked, every other value (a dict such as the price table included) is one setting, dumped in
    `mode` (pydantic's)."""
    flat, dumped = {}, model.model_dump(mode=mode)
    for key in type(model).model_fields:
        value = getattr(model, key)
        if isinstance(value, BaseModel):
            flat.update(flatten(value, f"{prefix}{key}.", mode))
        else:
            flat[f"{prefix}{key}"] = dumped[key]
    return flat
