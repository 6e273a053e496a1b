"""Agent tools: `profile` (Nsight Compute summary of one bench case) and `inspect_compile` (compiler facts)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from avo.agent.tools.base import Tool, ToolArgs, ToolContext, ToolError
from avo.errors import UserError
from avo.profile import ProfileError


class ProfileArgs(ToolArgs):
    case: int | str = Field(0, description="Name of the timed case to profile, as the evaluate results show it, or "
                                          "its index (0 = the first).")
    library: bool = Field(False, description="Profile the library's own call on that case instead of the working "
                                             "copy: the kernel you race, its name (which gives its tile shape), "
                                             "grid, registers, shared memory and stalls.")


class InspectArgs(ToolArgs):
    """No arguments: the working copy, for this run's GPU."""


def profile(ctx: ToolContext, args: ProfileArgs):
    """Profile the working copy on one bench case with Nsight Compute (takes tens of seconds).

    Returns duration, SM / DRAM / L2 throughput, tensor-pipe use, occupancy (achieved and theoretical, with what
    limits it), registers and shared memory per block, the top warp-stall reasons, shared-memory bank conflicts,
    Nsight Compute's own hints, and where the kernel sits on the roofline of this GPU. With library=true, the same
    for the library's call on that case (cuDNN, cuBLAS), to compare against.
    """
    from avo.profile.ncu import profile_candidate

    if ctx.device != "cuda":
        raise ToolError("profile needs a GPU, and this run scores kernels with the interpreter; use inspect_compile "
                        "for registers, spills, shared memory and the instruction mix")
    out_dir = getattr(ctx.run, "profiles_dir", None) if ctx.run is not None else None
    workload = ctx.config.evaluation.workload if ctx.config is not None else None
    index = case_index(ctx.task_spec, workload, args.case)
    try:
        result = profile_candidate(None if args.library else ctx.workspace, ctx.task_spec, gpu=ctx.gpu,
                                   case_index=index, out_dir=out_dir, workload=workload, **_confinement(ctx))
    except Exception as exc:
        raise ToolError(_message("profile", exc)) from None
    text = result.text + (f"\n(raw ncu report: {result.csv_path.name})" if result.csv_path else "")
    return text, result.summary


def case_index(task_spec: str, workload, case: int | str) -> int:
    """The index among the timed cases (the workload's, if any) of the case named or numbered `case`."""
    if isinstance(case, int) or str(case).isdigit():
        return int(case)
    from avo import tasks

    names = [c.name for c in tasks.load(task_spec, workload).cases("bench")]
    if case not in names:
        raise ToolError(f"no timed case named {case}: the timed cases are {', '.join(names)}")
    return names.index(case)


def inspect_compile(ctx: ToolContext, args: InspectArgs):
    """Compile the working copy for this GPU (no GPU needed) and report, per kernel: registers per thread, spilled
    bytes, shared memory, an estimate of blocks per SM, and the instruction mix of the SASS and PTX (tensor-core
    HGMMA/HMMA, TMA UTMALDG, cp.async LDGSTS, local-memory LDL/STL, barriers, MUFU exp2).
    """
    from avo.profile.compiler import inspect_candidate

    try:
        report = inspect_candidate(ctx.workspace, ctx.task_spec, gpu=ctx.gpu, **_confinement(ctx))
    except Exception as exc:
        raise ToolError(_message("inspect_compile", exc)) from None
    return report.text, report.data


def _confinement(ctx: ToolContext) -> dict:
    """The run's sandbox policy for the children that run the working copy's code, the runs folder masked."""
    if ctx.config is None:
        return {}
    return {"sandbox": ctx.config.evaluation.sandbox, "hide": (Path(ctx.config.runs_dir),)}


def _message(tool: str, exc: Exception) -> str:
    """A failure the model can read: the one-line reason (plus the candidate's traceback when there is one)."""
    if isinstance(exc, ProfileError) and exc.detail:
        return f"{exc}\n{exc.detail}"
    if isinstance(exc, UserError):
        return str(exc)
    return f"{tool} failed unexpectedly: {type(exc).__name__}: {exc}"


def tools() -> list[Tool]:
    return [Tool("profile", ProfileArgs, profile), Tool("inspect_compile", InspectArgs, inspect_compile)]
