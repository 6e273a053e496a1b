"""Import a candidate's kernel.py and return its entry, with errors an agent can act on.

Each load uses a fresh module name, so two candidates (or two versions of one) can live in one process. Sibling
modules the candidate imports from its own folder are dropped from `sys.modules` afterwards, so a second candidate
with a helper of the same name gets its own.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

from avo.util.format import first_line

KERNEL_FILE = "kernel.py"
_counter = itertools.count()


class CandidateLoadError(Exception):
    """kernel.py could not be imported or lacks the entry: the evaluator reports it as compile_error."""

    rule = "compile"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def load_entry(candidate_dir: Path, entry: str) -> Callable[..., Any]:
    """Import `candidate_dir/kernel.py` under a unique module name and return its `entry` attribute."""
    candidate_dir = Path(candidate_dir).resolve()
    path = candidate_dir / KERNEL_FILE
    if not path.is_file():
        raise CandidateLoadError(f"{path.name} not found in {candidate_dir}")
    name = f"avo_candidate_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    before = set(sys.modules)
    sys.modules[name] = module
    sys.path.insert(0, str(candidate_dir))
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(name, None)
        raise CandidateLoadError(syntax_message(exc, candidate_dir)) from None
    except BaseException as exc:  # the candidate's module code raised: report it, never propagate
        sys.modules.pop(name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise CandidateLoadError(trimmed_traceback(exc, candidate_dir, "importing kernel.py failed")) from None
    finally:
        _forget_candidate_siblings(candidate_dir, before)
        try:
            sys.path.remove(str(candidate_dir))
        except ValueError:
            pass
    fn = getattr(module, entry, None)
    if fn is None or not callable(fn):
        raise CandidateLoadError(f"kernel.py defines no callable `{entry}`: the task calls {entry}(...)")
    return fn


def defines_entry(kernel_py: Path, entry: str) -> bool | None:
    """Whether kernel.py binds `entry` at top level (def, class, assignment or import); None if it does not parse.

    Lets the CLI refuse a file that cannot be a candidate before any process is spawned.
    """
    try:
        tree = ast.parse(Path(kernel_py).read_text(), filename=str(kernel_py))
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == entry:
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((alias.asname or alias.name.split(".")[0]) == entry for alias in node.names):
                return True
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            if any(isinstance(n, ast.Name) and n.id == entry for n in ast.walk(target)):
                return True
    return False


def syntax_message(exc: SyntaxError, candidate_dir: Path) -> str:
    where = _short_path(exc.filename or KERNEL_FILE, candidate_dir)
    lines = [f"SyntaxError: {exc.msg} ({where}:{exc.lineno})"]
    if exc.text:
        lines.append("    " + exc.text.rstrip("\n"))
        if exc.offset:
            lines.append("    " + " " * (exc.offset - 1) + "^")
    return "\n".join(lines)


def trimmed_traceback(exc: BaseException, candidate_dir: Path, headline: str, limit: int = 4000) -> str:
    """The exception with only the frames in the candidate's own files (the evaluator's frames are noise to it).

    Its first line names the exception (`headline: Type: message`), since logs and stop lines show only that; the
    whole exception ends it, as a Python traceback does."""
    candidate_dir = Path(candidate_dir).resolve()
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _inside(f.filename, candidate_dir)]
    lines = [f"{headline}: {first_line(exc)}"]
    for frame in frames[-8:]:
        lines.append(f"  {_short_path(frame.filename, candidate_dir)}:{frame.lineno} in {frame.name}")
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    lines.append("".join(traceback.format_exception_only(type(exc), exc)).strip())
    text = "\n".join(lines)
    return text if len(text) <= limit else text[: limit // 2] + "\n...\n" + text[-limit // 2:]


def _inside(filename: str, folder: Path) -> bool:
    try:
        return Path(filename).resolve().is_relative_to(folder)
    except (OSError, ValueError):
        return False


def _short_path(filename: str, folder: Path) -> str:
    try:
        return str(Path(filename).resolve().relative_to(Path(folder).resolve()))
    except (OSError, ValueError):
        return Path(filename).name


def _forget_candidate_siblings(candidate_dir: Path, before: set[str]) -> None:
    for mod_name in set(sys.modules) - before:
        module = sys.modules.get(mod_name)
        filename = getattr(module, "__file__", None)
        if filename and _inside(filename, candidate_dir) and not mod_name.startswith("avo_candidate_"):
            del sys.modules[mod_name]
