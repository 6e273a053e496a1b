"""Agent tools: `profile` (Nsight Compute summary of one bench case) and `inspect_compile` (compiler facts)."""

from __future__ import annotations

from pydantic import Field

from avo.agent.tools.base import Tool, ToolArgs, ToolContext, ToolError
from avo.errors import UserError
from avo.profile import ProfileError


class ProfileArgs(ToolArgs):
    case: int = Field(0, ge=0, description="Index of the bench case to profile (0 = the first bench case).")


class InspectArgs(ToolArgs):
    """No arguments: the working copy, for this run's GPU."""


def profile(ctx: ToolContext, args: ProfileArgs):
    """Profile the working copy on one bench case with Nsight Compute (takes tens of seconds).

    Returns duration, SM / DRAM / L2 throughput, tensor-pipe use, occupancy (achieved and theoretical, with what
    limits it), registers and shared memory per block, the top warp-stall reasons, shared-memory bank conflicts,
    Nsight Compute's own hints, and where the kernel sits on the roofline of this GPU.
    """
    from avo.profile.ncu import profile_candidate

    if ctx.device != "cuda":
        raise ToolError("profile needs a GPU, and this run scores kernels with the interpreter; use inspect_compile "
                        "for registers, spills, shared memory and the instruction mix")
    out_dir = getattr(ctx.run, "profiles_dir", None) if ctx.run is not None else None
    try:
        result = profile_candidate(ctx.workspace, ctx.task_spec, gpu=ctx.gpu, case_index=args.case, out_dir=out_dir)
    except Exception as exc:
        raise ToolError(_message("profile", exc)) from None
    text = result.text + (f"\n(raw ncu report: {result.csv_path.name})" if result.csv_path else "")
    return text, result.summary


def inspect_compile(ctx: ToolContext, args: InspectArgs):
    """Compile the working copy for this GPU (no GPU needed) and report, per kernel: registers per thread, spilled
    bytes, shared memory, an estimate of blocks per SM, and the instruction mix of the SASS and PTX (tensor-core
    HGMMA/HMMA, TMA UTMALDG, cp.async LDGSTS, local-memory LDL/STL, barriers, MUFU exp2).
    """
    from avo.profile.compiler import inspect_candidate

    try:
        report = inspect_candidate(ctx.workspace, ctx.task_spec, gpu=ctx.gpu)
    except Exception as exc:
        raise ToolError(_message("inspect_compile", exc)) from None
    return report.text, report.data


def _message(tool: str, exc: Exception) -> str:
    """A failure the model can read: the one-line reason (plus the candidate's traceback when there is one)."""
    if isinstance(exc, ProfileError) and exc.detail:
        return f"{exc}\n{exc.detail}"
    if isinstance(exc, UserError):
        return str(exc)
    return f"{tool} failed unexpectedly: {type(exc).__name__}: {exc}"


def tools() -> list[Tool]:
    return [Tool("profile", ProfileArgs, profile), Tool("inspect_compile", InspectArgs, inspect_compile)]
