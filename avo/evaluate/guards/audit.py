"""Process-wide watchers the Sentinel reads: an audit hook (file writes, process spawns, sockets) and a thread-start
hook. Both are installed once per process and report to every active Sentinel; each Sentinel keeps what concerns
its own candidate, decided by which candidate's frames are on the stack.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
PATH_EVENTS = {  # event -> indices of its path arguments that get written, created or removed
    "os.remove": (0,), "os.rename": (0, 1), "os.mkdir": (0,), "os.rmdir": (0,), "os.symlink": (1,),
    "os.link": (1,), "os.truncate": (0,), "os.chmod": (0,), "os.chown": (0,), "os.utime": (0,),
    "shutil.copyfile": (1,), "shutil.copytree": (1,), "shutil.rmtree": (0,), "shutil.move": (0, 1),
    "shutil.copymode": (1,), "shutil.copystat": (1,), "shutil.chown": (0,),
}
SPAWN_EVENTS = frozenset(
    "os.system subprocess.Popen os.exec os.posix_spawn os.spawn os.fork os.forkpty pty.spawn os.kill os.killpg "
    "signal.pthread_kill socket.connect socket.bind socket.sendto".split()
)
STDLIB = tuple({os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")})
LIBRARIES = tuple({os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("purelib", "platlib")})
"""Installed packages; they may sit inside the standard library's folder, yet are not part of it."""


def is_stdlib(path: str) -> bool:
    return path.startswith(STDLIB) and not path.startswith(LIBRARIES)
_OWN_FILES = (os.path.realpath(__file__), os.path.join(os.path.dirname(os.path.realpath(__file__)), "sentinel.py"))

Listener = Callable[[str, str, Any], None]
"""Called as listener(kind, what, payload): kind 'write' (payload: path) or 'spawn' (payload: event args)."""
_listeners: list[Listener] = []
_installed = False

thread_starts: list[tuple[str, list[str]]] = []
"""(description, code files of the thread's target) for every thread `threading` started since the hook went in."""


def _audit(event: str, args: tuple) -> None:
    if not _listeners:
        return
    if event == "open":
        path, mode, flags = args
        writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & _WRITE_FLAGS)
        if writes and isinstance(path, str | bytes | os.PathLike):
            _tell("write", "open for writing", path)
    elif event in PATH_EVENTS:
        for i in PATH_EVENTS[event]:
            if i < len(args) and isinstance(args[i], str | bytes | os.PathLike):
                _tell("write", event, args[i])
    elif event in SPAWN_EVENTS:
        _tell("spawn", event, args)


def _tell(kind: str, what: str, payload: Any) -> None:
    for listener in list(_listeners):
        listener(kind, what, payload)


def on_thread_start(frame, event, arg):
    """threading's profile hook: runs first thing in every thread `threading` starts; notes it and steps aside."""
    sys.setprofile(None)
    thread = threading.current_thread()
    target = getattr(thread, "_target", None)
    files = []
    for fn in (target, getattr(type(thread), "run", None)):
        code = getattr(fn, "__code__", None) or getattr(getattr(fn, "__func__", None), "__code__", None)
        if code is not None:
            files.append(os.path.realpath(code.co_filename))
    where = f" running {Path(files[0]).name}" if files and target is not None else ""
    thread_starts.append((f"thread '{thread.name}'{where}", files))


def install(listener: Listener) -> None:
    global _installed
    if not _installed:
        sys.addaudithook(_audit)  # permanent: Python offers no way to remove an audit hook
        _installed = True
    threading.setprofile(on_thread_start)
    _listeners.append(listener)


def uninstall(listener: Listener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)
    if not _listeners and threading.getprofile() is on_thread_start:
        threading.setprofile(None)


def inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def real(path: Any) -> str:
    return os.path.realpath(os.fsdecode(os.fspath(path)))


def frame_in(folder: str, frame: Any, innermost_only: bool) -> str | None:
    """'file:line' of the first frame from `frame` outwards whose code lives in `folder`. With innermost_only, only
    when no library frame comes first (standard library and this module do not count), so a library's own process
    (Triton running ptxas) is not blamed on the candidate whose kernel it compiles."""
    while frame is not None:
        name = frame.f_code.co_filename
        path = name if name.startswith("<") else os.path.realpath(name)
        if inside(path, folder):
            return f"{os.path.relpath(path, folder)}:{frame.f_lineno}"
        if innermost_only and not (path.startswith("<") or is_stdlib(path) or path in _OWN_FILES):
            return None
        frame = frame.f_back
    return None
