"""The `shell` tool, offered only with `--allow-shell`: a command run in the workspace, its group killed at the
timeout, with an environment of a few allowed variables (no API keys), inside the OS sandbox unless the run has it
off (avo.evaluate.sandbox): its own PID namespace, so nothing it starts outlives the call and avo's processes (and
their environments) are out of its sight; no network; writes to the workspace and a private /tmp only."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from avo.agent.tools.base import Tool, ToolArgs, ToolContext, ToolError
from avo.evaluate import interpreter
from avo.evaluate import sandbox
from avo.util import procs
from avo.util.secrets import allowed

MAX_OUTPUT_CHARS = 12_000


class ShellArgs(ToolArgs):
    command: str = Field(description="A shell command, run in the workspace")
    timeout_s: float = Field(60.0, gt=0, le=600, description="Seconds before the command is killed")


SHELL_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR", "USER", "CUDA_VISIBLE_DEVICES", "CUDA_HOME",
                  "LD_LIBRARY_PATH")


def shell(ctx: ToolContext, args: ShellArgs):
    """Run a shell command in the workspace (enabled by --allow-shell): no API keys in its environment."""
    if not getattr(getattr(ctx.config, "agent", None), "allow_shell", False):
        raise ToolError("the shell tool is disabled (start the run with --allow-shell to enable it)")
    env = allowed(SHELL_ENV_KEEP)
    if ctx.device == "interpret":  # as the evaluator's workers run: interpreted, GPUs hidden
        env.update(interpreter.ENV)
    cmd = ["/bin/sh", "-c", args.command]
    if sandbox.wanted(getattr(getattr(ctx.config, "evaluation", None), "sandbox", "auto")):
        runs = getattr(ctx.config, "runs_dir", None)
        cmd = sandbox.command(cmd, writable=[ctx.workspace], cwd=ctx.workspace, hide=(Path(runs),) if runs else ())
    # its whole group is killed at the timeout (compilers and kernels it started), and with avo
    returncode, out, _ = procs.run(cmd, timeout_s=args.timeout_s, cwd=ctx.workspace, env=env)
    timed_out = returncode is None
    if len(out) > MAX_OUTPUT_CHARS:
        out = out[:MAX_OUTPUT_CHARS // 2] + "\n... (output truncated) ...\n" + out[-MAX_OUTPUT_CHARS // 2:]
    head = f"killed after {args.timeout_s:g}s" if timed_out else f"exit {returncode}"
    return f"{head}\n{out}", {"returncode": -9 if timed_out else returncode, "timed_out": timed_out, "output": out}


def tools() -> list[Tool]:
    return [Tool("shell", ShellArgs, shell)]
