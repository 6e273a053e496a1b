"""`avo bench CANDIDATE --kernel attention|gemm|PATH`: score one candidate folder, as the evolution loop would.
`avo bench --kernel DIR --candidates SOLUTIONS`: every KernelBench problem in DIR, with fast_p (bench_folder.py)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from avo.errors import UserError
from avo.evaluate.guards.rules import OPS_POLICIES
from avo.util.format import finite, number

SUITES = ("bench", "wide", "check", "tiny")
SUITE_PLAN = {"bench": ("check", "bench"), "wide": ("check", "wide"), "check": ("check", ""), "tiny": ("tiny", "tiny")}
"""--suite -> (suite checked, suite timed or '' for none)."""
DEVICES = ("cuda", "interpret")


def register(app: typer.Typer) -> None:
    @app.command("bench")
    def bench(
        candidate: str | None = typer.Argument(None, help="Folder whose kernel.py defines the task's entry."),
        kernel: str = typer.Option(..., "--kernel", help="Task: attention, gemm, a KernelBench-format file, or a "
                                   "folder of them (with --candidates)."),
        candidates: str | None = typer.Option(None, "--candidates", help="With --kernel DIR: the folder holding "
                                              "<problem stem>/kernel.py for each problem file in DIR."),
        suite: str = typer.Option("bench", "--suite", help="bench (check suite, then timed bench suite), wide (check "
                                  "suite, then the shapes models run: attention and gemm), check "
                                  "(correctness only) or tiny (interpreter-sized, checked and timed)."),
        gpu: str = typer.Option("auto", "--gpu", help="auto, h100, h200 or b200; must be the GPU present."),
        device: str = typer.Option("cuda", "--device", help="cuda, or interpret (Triton interpreter on the CPU: "
                                   "always the tiny suite, untimed with --suite check, wall-clock times labelled "
                                   "'interpreter')."),
        as_json: bool = typer.Option(False, "--json", help="Print the EvalResult as JSON instead of a table."),
        seed: int | None = typer.Option(None, "--seed", help="Seed for the check inputs (default: a fresh one)."),
        ops: str | None = typer.Option(None, "--ops", help="KernelBench tasks: strict (default: every compute op is "
                                       "the candidate's own) or partial (torch ops allowed for the parts it does "
                                       "not replace)."),
        baseline: str | None = typer.Option(None, "--baseline", help="KernelBench tasks: eager (default) or "
                                            "compile (torch.compile(Model)); with --kernel DIR, compile adds a "
                                            "column against torch.compile beside the one against eager."),
        shapes: list[str] | None = typer.Option(None, "--shapes", help="A case to time instead of the bench suite "
                                                "(repeatable): B=8,Hq=32,Hkv=8,S=2048,D=128,causal or "
                                                "M=512,N=6144,K=4096, optional weight=2 and fp16."),
        workload: str | None = typer.Option(None, "--workload", help="YAML file of the cases to time instead of "
                                            "the bench suite (name: ..., cases: [...])."),
        model: str | None = typer.Option(None, "--model", help="A Hugging Face config.json: that model's shapes "
                                         "at --tokens are timed instead of the bench suite."),
        tokens: str | None = typer.Option(None, "--tokens", help="With --model: token counts, e.g. 2048,8192."),
        batch: int | None = typer.Option(None, "--batch", help="With --model and --kernel attention: sequences "
                                         "per case (default 1)."),
    ) -> None:
        """Check and time a candidate against the task's reference and library, in an isolated process."""
        bench_command(candidate, kernel, candidates, suite, gpu, device, as_json, seed, ops, baseline,
                      dict(shapes=shapes, workload=workload, model=model, tokens=tokens, batch=batch))


def bench_command(candidate: str | None, kernel: str, candidates: str | None, suite: str, gpu: str, device: str,
                  as_json: bool, seed: int | None, ops: str | None, baseline: str | None, workload_flags: dict) -> None:
    """What `avo bench` does with its flags: a folder sweep, or one candidate scored and shown."""
    from avo.config import EvalConfig
    from avo.evaluate.harness import Evaluator
    from avo.tasks.kernelbench.spec import BASELINES, with_options
    from avo.tasks.workload import from_flags

    if Path(kernel).is_dir():
        from avo.commands.bench_folder import bench_folder

        if candidate is not None:
            raise UserError(f"--kernel {kernel} is a folder of problems: give their solutions with --candidates "
                            "SOLUTIONS instead of one candidate folder")
        if candidates is None:
            raise UserError(f"--kernel {kernel} is a folder of problems: give --candidates SOLUTIONS, the folder "
                            "holding <problem stem>/kernel.py for each")
        if baseline is not None and baseline not in BASELINES:
            raise UserError(f"unknown baseline '{baseline}': use eager or compile")
        validate_choices(suite, device)
        raise typer.Exit(bench_folder(Path(kernel), Path(candidates), suite_plan=SUITE_PLAN[suite], suite=suite,
                                      gpu=gpu, device=device, ops=ops, compile_too=baseline == "compile",
                                      seed=seed, as_json=as_json))
    if candidates is not None:
        raise UserError("--candidates goes with --kernel DIR, a folder of problem files")
    if candidate is None:
        raise UserError("give the candidate folder to score (or --kernel DIR --candidates SOLUTIONS)")
    kernel = with_options(kernel, ops=ops, baseline=baseline)
    users = from_flags(kernel.partition("?")[0], **workload_flags)
    if users is not None and suite not in ("bench", "check"):
        raise UserError(f"a workload replaces the timed suite: use --suite bench (or check), not {suite}")
    folder, task, profile = validate(candidate, kernel, suite, gpu, device)
    check_suite, bench_suite = SUITE_PLAN[suite]
    config = EvalConfig(seed=seed, check_suite=check_suite, bench_suite=bench_suite, workload=users)
    result = Evaluator(kernel, device=device, gpu=profile, config=config).evaluate(folder)
    if as_json:
        payload = {"candidate": str(folder), "task": task.name, "suite": suite,
                   "workload": users.model_dump(mode="json") if users else None, **result.model_dump(mode="json")}
        typer.echo(json.dumps(payload, indent=2))
    else:
        render(result, folder, task.name, f"{suite}, workload {users.describe()}" if users else suite)
    if result.status != "correct":
        raise typer.Exit(1)


def validate(candidate: str, kernel: str, suite: str, gpu: str, device: str):
    """(candidate folder, task, GPU profile), or a UserError saying what to fix; nothing is spawned before this."""
    from avo import tasks
    from avo.evaluate.worker.loader import KERNEL_FILE, defines_entry
    from avo.gpus import resolve
    from avo.seed_target import check_seed_for_gpu

    validate_choices(suite, device)
    path = Path(candidate)
    if not path.exists():
        raise UserError(f"candidate not found: {candidate} (give a folder holding {KERNEL_FILE})")
    folder = path.parent if path.is_file() and path.name == KERNEL_FILE else path
    if not folder.is_dir():
        raise UserError(f"{candidate} is not a candidate folder: give a folder holding {KERNEL_FILE}")
    if not (folder / KERNEL_FILE).is_file():
        raise UserError(f"no {KERNEL_FILE} in {folder}: a candidate folder holds a {KERNEL_FILE} defining the entry")
    task = tasks.load(kernel)
    if device != "interpret" and SUITE_PLAN[suite][1]:
        task.cases(SUITE_PLAN[suite][1])  # a suite this task lacks (wide for a KernelBench file) is refused here
    if defines_entry(folder / KERNEL_FILE, task.entry) is False:
        raise UserError(f"{folder / KERNEL_FILE} defines no `{task.entry}`: the {task.name} task calls "
                        f"{task.entry}(...) from it")
    profile = resolve(gpu, device)
    check_seed_for_gpu(folder, profile, role="candidate")
    if hasattr(task, "preflight"):  # task files: broken get_inputs, uncheckable randomness, inputs too big
        task.preflight(device)
    return folder.resolve(), task, profile


def validate_choices(suite: str, device: str) -> None:
    if suite not in SUITES:
        raise UserError(f"unknown suite '{suite}': use {', '.join(SUITES)}")
    if device not in DEVICES:
        raise UserError(f"unknown device '{device}': use cuda, or interpret to run on the CPU")


def render(result, folder: Path, task_name: str, suite: str) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 160))
    interp = result.device == "interpret"
    clock = "interpreter (wall clock, not GPU performance)" if interp else f"gpu (CUDA events, {result.gpu})"
    table = Table(title=f"avo bench: {folder.name} · {task_name} · suite {suite} · times: {clock}")
    hosted = any(c.host_us is not None for c in result.cases)  # GPU timing: the launch work per call is known
    precise = any(c.library_precision for c in result.cases)  # float32 cases: which library the speedup is against
    for header in ("case", "correct", "rel err", "ms", "library ms", "TFLOPS", "library TFLOPS", "speedup", "spread",
                   "rounds", *(["library as"] if precise else []), *(["host µs"] if hosted else [])):
        table.add_column(header, justify="left" if header == "case" else "right", no_wrap=header != "case",
                         overflow="fold")  # a narrow terminal folds a case name rather than cut it short
    for c in result.cases:
        correct = "-" if c.correct is None else ("yes" if c.correct else "NO")
        spread = "-" if c.spread is None else f"{c.spread * 100:.1f}%"
        speedup = finite(c.speedup, ".3f") + ("" if c.speedup_error is None else f" ±{c.speedup_error * 100:.1f}%")
        # The candidate's launch work per call, the library's, and the device spin that kept them off the clock.
        host = "-" if c.host_us is None else \
            f"{c.host_us:.0f}/{number(c.library_host_us, '.0f')}/{number(c.launch_shield_us, '.0f')}"
        table.add_row(f"{c.case} ({c.suite})", correct, finite(c.rel_err, ".2e"), finite(c.ms, ".4g"),
                      finite(c.library_ms, ".4g"), finite(c.tflops, ".4g"), finite(c.library_tflops, ".4g"),
                      speedup, spread, number(c.rounds, "d"), *([c.library_precision or "-"] if precise else []),
                      *([host] if hosted else []))
    console.print(table)
    if precise:
        console.print("library as: fp32 (as configured, TF32 off) or tf32 (TF32 allowed: the candidate's float32 error "
                      "is past what fp32 arithmetic gives)", markup=False)
    if hosted:
        console.print("host µs: the candidate's launch work per call / the library's / the device spin before each "
                      "timed call that kept it off the clock", markup=False)
    console.print(f"status: {result.status}" + (f" ({result.rule})" if result.rule else "")
                  + f" · ops={result.ops} ({OPS_POLICIES.get(result.ops, '')})", markup=False)
    if result.message:
        console.print(result.message, markup=False)
    if result.bench_cases():
        src = "interpreter" if interp else "gpu"
        error = result.fitness_error()
        within = "" if error is None else f" ±{error * 100:.2f}% (standard error)"
        weighted = "weighted " if len({c.weight for c in result.bench_cases()}) > 1 else ""
        console.print(f"fitness: {result.fitness:.4f}{within} ({weighted}geometric-mean speedup over "
                      f"{result.library or 'the library'}, times from the {src})", markup=False)
    for note in result.notes:
        console.print(f"note: {note}", markup=False)
    if result.suspicious:
        console.print(f"SUSPICIOUS: {result.suspicious_reason}", markup=False)
    stages = ", ".join(f"{k} {v:.1f}s" + _parts(result.stage_s, k) for k, v in result.stage_s.items() if "." not in k)
    console.print(f"seed {result.seed} · device {result.device} · gpu {result.gpu} · wall {result.wall_s:.1f}s"
                  + (f" ({stages})" if stages else ""), markup=False)


def _parts(stage_s: dict[str, float], stage: str) -> str:
    """A stage's parts (`stage.part` entries), shown inside its figure."""
    parts = [f"{k[len(stage) + 1:]} {v:.1f}s" for k, v in stage_s.items() if k.startswith(stage + ".")]
    return f" [{', '.join(parts)}]" if parts else ""
