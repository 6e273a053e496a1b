"""`avo profile` (Nsight Compute summary of one case) and `avo inspect` (compile facts, no GPU needed)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from avo.errors import UserError


def register(app: typer.Typer) -> None:
    app.command("profile")(profile)
    app.command("inspect")(inspect)


NO_SANDBOX_HELP = ("Run the candidate's code outside the OS sandbox (for a kernel you trust, e.g. where the driver "
                   "refuses a sandboxed ncu the performance counters).")


def _sandbox(no_sandbox: bool) -> str:
    """The evaluations' policy: the sandbox where it works, unless switched off."""
    return "off" if no_sandbox else "auto"


SUITE_HELP = "Suite the case is taken from: bench, wide (the shapes models run), check, tiny."
CASE_HELP = "The case: its index in the suite, or its name (e.g. b64_h32-8_s512_d128_causal)."


def _case_index(kernel: str, suite: str, case: str) -> int:
    """--case as an index of the suite's cases, or the index of the case so named; UserError otherwise."""
    if case.lstrip("-").isdigit():
        if int(case) < 0:
            raise UserError(f"--case must be 0 or more (got {case})")
        return int(case)
    from avo.tasks import load

    names = [c.name for c in load(kernel).cases(suite)]
    if case not in names:
        shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
        raise UserError(f"no case named {case!r} in the {suite} suite of {kernel} ({len(names)} cases: {shown})")
    return names.index(case)


def _candidate(path: Path) -> Path:
    if not path.is_dir():
        raise UserError(f"candidate folder not found: {path}")
    if not (path / "kernel.py").is_file():
        raise UserError(f"{path} has no kernel.py: a candidate is a folder whose kernel.py defines the task's entry")
    return path.resolve()


def profile(
    candidate: Path | None = typer.Argument(None, help="Candidate folder (holds kernel.py); none with --library."),
    kernel: str = typer.Option(..., "--kernel", help="Task: attention, gemm, or a KernelBench-format .py file."),
    case: str = typer.Option("0", "--case", help=CASE_HELP),
    suite: str = typer.Option("bench", "--suite", help=SUITE_HELP),
    gpu: str = typer.Option("auto", "--gpu", help="GPU profile for the roofline: auto, h100, h200 or b200."),
    run: str | None = typer.Option(None, "--run", help="Keep the raw ncu CSV in this run's profiles/ (id, path or "
                                   "latest)."),
    runs_dir: Path = typer.Option(Path("runs"), "--runs-dir", help="Folder holding the runs."),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds before ncu is stopped."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    no_sandbox: bool = typer.Option(False, "--no-sandbox", help=NO_SANDBOX_HELP),
    library: bool = typer.Option(False, "--library", help="Profile the library's own call on the case (cuDNN SDPA, "
                                 "cuBLAS through torch.matmul) instead of a candidate: the kernel it chose, whose "
                                 "name gives its tile shape, its grid, registers and stalls."),
) -> None:
    """Profile one case of CANDIDATE (a bench case unless --suite says), or the library's call on it (--library),
    with Nsight Compute and print a compact summary."""
    from avo.gpus import nvml_device_name, resolve
    from avo.profile.ncu import profile_candidate

    if (candidate is None) == (not library):
        raise UserError("avo profile takes a candidate folder or --library, not both" if library else
                        "avo profile needs a candidate folder, or --library to profile the library's call")
    folder = None if library else _candidate(candidate)
    index = _case_index(kernel, suite, case)
    if nvml_device_name() is None:
        raise UserError("avo profile needs an NVIDIA GPU and none was found: `avo inspect` reports registers, spills "
                        "and the instruction mix without one")
    profile_gpu = resolve(gpu, "cuda")
    out_dir = None
    if run is not None:
        from avo.run.directory import Run

        opened = Run.open(run, runs_dir)
        out_dir = opened.profiles_dir
        opened.close()
    result = profile_candidate(folder, kernel, gpu=profile_gpu, case_index=index, suite=suite, out_dir=out_dir,
                               timeout_s=timeout, sandbox=_sandbox(no_sandbox), hide=(runs_dir,))
    if as_json:
        print(json.dumps(result.summary, indent=2))
        return
    print(result.text)
    print(f"(profiled in {result.seconds:.1f} s" + (f"; raw report {result.csv_path})" if result.csv_path else ")"))


def inspect(
    candidate: Path = typer.Argument(..., help="Candidate folder (holds kernel.py, and any .cu files)."),
    kernel: str = typer.Option(..., "--kernel", help="Task: attention, gemm, or a KernelBench-format .py file."),
    gpu: str = typer.Option("h200", "--gpu", help="Compile target, by GPU profile: h100, h200 (sm_90a) or b200 "
                            "(sm_100a)."),
    case: str = typer.Option("0", "--case", help="The case whose shapes pick the constexprs the wrapper uses: its "
                             "index in the suite, or its name."),
    suite: str = typer.Option("bench", "--suite", help=SUITE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the full report (histograms included) as JSON."),
    runs_dir: Path = typer.Option(Path("runs"), "--runs-dir", help="Folder holding the runs (masked in the sandbox)."),
    no_sandbox: bool = typer.Option(False, "--no-sandbox", help=NO_SANDBOX_HELP),
) -> None:
    """Compile CANDIDATE's kernels for a GPU without running them: registers, spills, shared memory, SASS/PTX mix."""
    from avo.gpus import resolve
    from avo.profile.compiler import inspect_candidate

    folder = _candidate(candidate)
    index = _case_index(kernel, suite, case)
    report = inspect_candidate(folder, kernel, gpu=resolve(gpu, "interpret"), case_index=index, suite=suite,
                               sandbox=_sandbox(no_sandbox), hide=(runs_dir,))
    print(json.dumps(report.data, indent=2) if as_json else report.text)
