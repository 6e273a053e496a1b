"""`ast.parse` taken by one thread at a time, on the CPython releases that need it.

CPython 3.11.0-3.11.7 and 3.12.0-3.12.1 keep the AST constructor's recursion depth in interpreter-wide state, and
the garbage collector can let another thread's parse run in the middle of one's construction: either then raises
"SystemError: AST constructor recursion depth mismatch" for nothing (CPython issue 106905, fixed in 3.11.8 and
3.12.2). avo parses on several threads of one process (the agent's, the evaluation pool's, the package builder's)
and Triton parses its kernels on the compile-ahead pool's threads, so `install()`, run when avo is imported, puts
one lock around the module's parse for every caller in the process. A reentrant lock: a finalizer that parses,
run by the garbage collector inside a parse, does not wait on its own thread.
"""

from __future__ import annotations

import ast
import functools
import sys
import threading
from collections.abc import Callable

_LOCK = threading.RLock()


def affected(version: tuple[int, ...] = tuple(sys.version_info[:3])) -> bool:
    return (3, 11, 0) <= version < (3, 11, 8) or (3, 12, 0) <= version < (3, 12, 2)


def serialized(parse: Callable) -> Callable:
    @functools.wraps(parse)
    def parse_alone(*args, **kwargs):
        with _LOCK:
            return parse(*args, **kwargs)

    parse_alone.avo_serialized = True  # type: ignore[attr-defined]
    return parse_alone


def install() -> None:
    """Once per process, where this CPython needs it."""
    if affected() and not getattr(ast.parse, "avo_serialized", False):
        ast.parse = serialized(ast.parse)
