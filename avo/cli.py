"""The `avo` command. Thin: each command lives in avo/commands/<name>.py and registers itself here.

Errors meant for people (`UserError`, bad flags) print one line and exit with code 2; `--debug` shows tracebacks.
"""

from __future__ import annotations

import errno
import importlib
import os
import sys

import typer

try:  # typer >= 0.29 carries its own copy of click
    from typer._click import exceptions as cx
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as cx

from avo.errors import UserError

COMMAND_MODULES = (
    "doctor", "bench", "evolve", "runs", "replay", "report", "serve", "profile", "docs", "package",
)

app = typer.Typer(
    name="avo",
    help="An autonomous agent that evolves GPU kernels, scored against the vendor library on the same GPU.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show tracebacks instead of one-line errors.")) -> None:
    if debug:
        os.environ["AVO_DEBUG"] = "1"


for _name in COMMAND_MODULES:
    try:
        _module = importlib.import_module(f"avo.commands.{_name}")
    except ModuleNotFoundError as _exc:
        if _exc.name != f"avo.commands.{_name}":
            raise
        continue
    _module.register(app)


FILESYSTEM_REFUSALS = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT)
"""Errors of the user's filesystem, not of avo: a read-only or full runs directory is for the user to fix."""


def filesystem_refusal(exc: OSError) -> str:
    where = exc.filename or "a file"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"no space left writing {where}: free some space, or choose another --runs-dir"
    return (f"cannot write {where}: {exc.strerror or 'permission denied'}; make it writable, or choose another "
            "--runs-dir")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    from avo.util.procs import sweep_stale

    sweep_stale()  # temp folders an avo killed before it could clean up left behind
    try:
        exit_code = app(args=argv, prog_name="avo", standalone_mode=False)  # click returns typer.Exit's code
    except UserError as exc:
        if debug:
            raise
        print(f"avo: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except cx.NoArgsIsHelpError as exc:
        print(exc.ctx.get_help() if getattr(exc, "ctx", None) else exc.format_message())
        return 0
    except cx.UsageError as exc:
        if debug:
            raise
        where = exc.ctx.command_path if getattr(exc, "ctx", None) else "avo"
        print(f"avo: error: {exc.format_message()} (see: {where} --help)", file=sys.stderr)
        return 2
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        print("avo: interrupted", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("avo: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        if debug or os.environ.get("AVO_DEBUG") or exc.errno not in FILESYSTEM_REFUSALS:
            raise
        print(f"avo: error: {filesystem_refusal(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:
        if debug or os.environ.get("AVO_DEBUG"):
            raise
        print(f"avo: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return 1
    return exit_code if isinstance(exit_code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
