"""Where a path expression in a candidate's source points, as far as the source says: inside the candidate's folder,
in the temp folder, outside, or unknown. The static guard rejects file access through the last two.

A value is ("in", kind, depth): a path to a file ("file") whose folder is `depth` levels below the candidate's
folder, or to a folder ("dir") `depth` levels below it. Depths are never overestimated, so `.parent` cannot walk out
unnoticed. Relative paths count from the working directory (the evaluator runs candidates in an empty temporary
folder): harmless unless they climb out with '..'.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

PathValue = tuple
UNKNOWN: PathValue = ("unknown",)
TEMP: PathValue = ("temp",)
CWD: PathValue = ("in", "dir", 0)

_CONSTRUCTORS = frozenset(
    "pathlib.Path pathlib.PurePath pathlib.PosixPath pathlib.PurePosixPath os.fspath builtins.str os.path.abspath "
    "os.path.realpath os.path.normpath os.fsencode os.fsdecode".split()
)
_SAME_PLACE_METHODS = frozenset("resolve absolute with_suffix with_stem as_posix __fspath__".split())


def outside(why: str) -> PathValue:
    return ("out", why)


def parent(value: PathValue) -> PathValue:
    if value[0] == "temp":
        return outside("the temp folder's parent")
    if value[0] != "in":
        return value
    _, kind, depth = value
    if kind == "file":
        return ("in", "dir", depth)
    return ("in", "dir", depth - 1) if depth > 0 else outside("the parent of the candidate's folder")


def descend(value: PathValue, relative: str) -> PathValue:
    """`value / relative` for a constant `relative`."""
    if relative.startswith(("/", "~")):
        return outside(f"the absolute path {relative!r}")
    for part in relative.split("/"):
        if value[0] not in ("in", "temp"):
            return value
        if part in ("", "."):
            continue
        if part == "..":
            value = parent(value)
        elif value[0] == "in":
            value = ("in", "file", value[2])  # a folder's entry; its own depth is never overestimated
    return value


def append(value: PathValue, tail: str) -> PathValue:
    """`str(value) + tail`: a tail starting with '/' goes below `value`; any other extends its last name."""
    if tail.startswith("/"):
        return descend(value, tail[1:])
    if value[0] == "temp" or (value[0] == "in" and value[1] == "dir"):
        value = descend(parent(value), "renamed")  # a longer folder name is a sibling folder
    return descend(value, tail.split("/", 1)[1]) if "/" in tail else value


class PathReader:
    """Evaluates path expressions of one file. `resolve` and `fold` come from the file's name resolver."""

    def __init__(self, resolve: Callable[[ast.AST], str | None], fold: Callable[[ast.AST], str | None],
                 file_depth: int):
        self.resolve, self.fold, self.file_depth = resolve, fold, file_depth
        self.variables: dict[str, PathValue] = {}

    def value(self, node: ast.AST) -> PathValue:
        text = self.fold(node)
        if text is not None:
            return descend(CWD, text)
        if isinstance(node, ast.Name):
            if node.id == "__file__":
                return ("in", "file", self.file_depth)
            return self.variables.get(node.id, UNKNOWN)
        if isinstance(node, ast.Attribute):
            return parent(self.value(node.value)) if node.attr == "parent" else UNKNOWN
        if isinstance(node, ast.Subscript):  # Path(__file__).parents[n]
            index = node.slice
            if (isinstance(node.value, ast.Attribute) and node.value.attr == "parents"
                    and isinstance(index, ast.Constant) and isinstance(index.value, int)):
                value = self.value(node.value.value)
                for _ in range(index.value + 1):
                    value = parent(value)
                return value
            return UNKNOWN
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            return self._join(self.value(node.left), [node.right])
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            tail = self.fold(node.right)
            return UNKNOWN if tail is None else append(self.value(node.left), tail)
        if isinstance(node, ast.JoinedStr) and node.values:
            head, rest = node.values[0], node.values[1:]
            if isinstance(head, ast.FormattedValue):
                tail = self.fold(ast.JoinedStr(values=rest)) if rest else ""
                return UNKNOWN if tail is None else append(self.value(head.value), tail)
            return UNKNOWN
        if isinstance(node, ast.Call):
            return self._call(node)
        return UNKNOWN

    def _join(self, base: PathValue, parts: list[ast.AST]) -> PathValue:
        for part in parts:
            text = self.fold(part)
            if text is None:
                return UNKNOWN if base[0] in ("in", "temp") else base
            base = descend(base, text)
        return base

    def _call(self, node: ast.Call) -> PathValue:
        func = self.resolve(node.func)
        if func in _CONSTRUCTORS:
            if not node.args:
                return CWD
            return self._join(self.value(node.args[0]), node.args[1:])
        if func == "os.path.dirname" and node.args:
            return parent(self.value(node.args[0]))
        if func == "os.path.join" and node.args:
            return self._join(self.value(node.args[0]), node.args[1:])
        if func in ("os.getcwd", "pathlib.Path.cwd"):
            return CWD
        if func in ("pathlib.Path.home", "os.path.expanduser", "os.path.expandvars"):
            return outside("the home folder")
        if func and func.startswith("tempfile."):
            return TEMP
        if isinstance(node.func, ast.Attribute):
            method, base = node.func.attr, node.func.value
            if method in _SAME_PLACE_METHODS:
                return self.value(base)
            if method == "with_name" and node.args:
                name = self.fold(node.args[0])
                return UNKNOWN if name is None else descend(parent(self.value(base)), name)
            if method == "joinpath":
                return self._join(self.value(base), node.args)
            if method in ("expanduser", "home"):
                return outside("the home folder")
            if method == "cwd":
                return CWD
        return UNKNOWN
