"""Sentinel: created in the worker before the candidate is imported; `verify(stage)` says whether the candidate has
replaced a timer or scoring function, started a thread, or written outside its folder / started a process since.

Functions are compared by identity with what was captured at creation, so a replacement is seen however it was made
(assignment, setattr, a swapped sys.modules entry). Threads are compared with a baseline taken after torch's own
thread pools (and CUDA's) were started. File writes and process spawns are seen through a `sys.addaudithook` hook,
which cannot be removed once installed; they count when a frame of the candidate's code is on the stack.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path
from typing import Any

from avo.evaluate.guards_rules import Rejection

# Modules and classes whose functions the evaluator measures or scores with. Missing ones are skipped.
_WATCHED_MODULES = (
    "time", "torch", "torch.cuda", "torch.linalg", "torch.testing", "torch.nn.functional", "triton.testing",
    "avo.tasks.base", "avo.tasks.gemm", "avo.tasks.attention", "avo.evaluate.timing", "avo.evaluate.worker",
    "avo.evaluate.loader", "avo.evaluate.guards", "avo.evaluate.guards_sentinel", "avo.evaluate.result",
)
_WATCHED_CLASSES = ("torch.Tensor", "torch.cuda.Event", "torch.cuda.Stream", "threading.Thread")

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PATH_EVENTS = {  # event -> indices of its path arguments that get written, created or removed
    "os.remove": (0,), "os.rename": (0, 1), "os.mkdir": (0,), "os.rmdir": (0,), "os.symlink": (1,),
    "os.link": (1,), "os.truncate": (0,), "os.chmod": (0,), "os.chown": (0,), "os.utime": (0,),
    "shutil.copyfile": (1,), "shutil.copytree": (1,), "shutil.rmtree": (0,), "shutil.move": (0, 1),
    "shutil.copymode": (1,), "shutil.copystat": (1,), "shutil.chown": (0,),
}
_SPAWN_EVENTS = frozenset(
    "os.system subprocess.Popen os.exec os.posix_spawn os.spawn os.fork os.forkpty pty.spawn os.kill os.killpg "
    "signal.pthread_kill socket.connect socket.bind socket.sendto".split()
)
_STDLIB = tuple({os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib")})
_THIS_FILE = os.path.realpath(__file__)

_active: list[Sentinel] = []
_hook_installed = False


def _audit(event: str, args: tuple) -> None:
    if not _active:
        return
    if event == "open":
        path, mode, flags = args
        writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & _WRITE_FLAGS)
        if writes and isinstance(path, (str, bytes, os.PathLike)):
            for sentinel in _active:
                sentinel._saw_write("open for writing", path)
    elif event in _PATH_EVENTS:
        for i in _PATH_EVENTS[event]:
            if i < len(args) and isinstance(args[i], (str, bytes, os.PathLike)):
                for sentinel in _active:
                    sentinel._saw_write(event, args[i])
    elif event in _SPAWN_EVENTS:
        for sentinel in _active:
            sentinel._saw_spawn(event, args)


def _real(path: Any) -> str:
    path = os.fsdecode(os.fspath(path))
    return os.path.realpath(path)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _warm_runtime_threads() -> None:
    """Start torch's intra-op pool and CUDA's helper threads now, so that they belong to the baseline."""
    import torch

    from torch.utils._python_dispatch import TorchDispatchMode

    class _Warm(TorchDispatchMode):  # entering a mode the first time makes torch rebind some functions lazily
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    x = torch.ones(256, 256)
    with _Warm():
        (x @ x).sum()
    if torch.cuda.is_available():
        torch.cuda.init()
        start = torch.cuda.Event(enable_timing=True)
        start.record()
        torch.ones(1, device="cuda").add_(1)
        torch.cuda.synchronize()


def _native_threads() -> set[str]:
    try:
        return set(os.listdir("/proc/self/task"))
    except OSError:  # not Linux: Python-level checks only
        return set()


class Sentinel:
    """Watch the process for the candidate's side effects; `verify(stage)` raises the first one seen."""

    def __init__(self, candidate_dir: Path, *, allowed_dirs: tuple[Path, ...] = ()):
        global _hook_installed
        self.candidate_dir = os.path.realpath(candidate_dir)
        home = Path.home()
        self.allowed_dirs = tuple(
            os.path.realpath(d)
            for d in (
                self.candidate_dir,
                tempfile.gettempdir(),
                os.environ.get("TRITON_CACHE_DIR") or home / ".triton",
                os.environ.get("CUPY_CACHE_DIR") or home / ".cupy",
                *allowed_dirs,
            )
        ) + ("/dev/null",)
        self.events: list[tuple[str, str]] = []  # (rule, message), in the order seen
        _warm_runtime_threads()
        self._functions = self._capture()
        self._python_threads = set(sys._current_frames())
        self._native = _native_threads()
        self._started: list[str] = []
        threading.setprofile(self._thread_started)
        self._profile_hook = threading.getprofile()
        if not _hook_installed:
            sys.addaudithook(_audit)
            _hook_installed = True
        _active.append(self)

    # -- timers and scoring functions ---------------------------------------------------------------------------
    def _capture(self) -> dict[str, Any]:
        import torch  # noqa: F401  (torch.cuda and friends must be importable to be captured)

        captured: dict[str, Any] = {}
        for name in _WATCHED_MODULES:
            module = sys.modules.get(name)
            if module is None:
                continue
            captured[f"sys.modules[{name!r}]"] = module
            for attr, value in vars(module).items():
                if callable(value) and not isinstance(value, type(sys)):
                    captured[f"{name}.{attr}"] = value
        for dotted in _WATCHED_CLASSES:
            module_name, _, cls_name = dotted.rpartition(".")
            cls = getattr(sys.modules.get(module_name), cls_name, None)
            if cls is None:
                continue
            for attr in dir(cls):
                captured[f"{dotted}.{attr}"] = _static_lookup(cls, attr)
        return captured

    def _replaced(self) -> list[str]:
        changed = []
        for label, original in self._functions.items():
            if label.startswith("sys.modules["):
                current = sys.modules.get(label[len("sys.modules['"):-2])
            else:
                owner, _, attr = label.rpartition(".")
                current = _current(owner, attr)
            if current is not original and not _same_function(original, current):
                changed.append(label)
        return changed

    # -- threads --------------------------------------------------------------------------------------------------
    def _thread_started(self, frame, event, arg):
        """threading's profile hook: runs first thing in every thread threading starts; notes it and steps aside."""
        thread = threading.current_thread()
        target = getattr(thread, "_target", None)
        code = getattr(target, "__code__", None)
        where = f" running {Path(code.co_filename).name}:{code.co_firstlineno}" if code else ""
        self._started.append(f"thread '{thread.name}'{where}")
        sys.setprofile(None)

    def _thread_findings(self) -> list[str]:
        found = list(self._started)
        frames = sys._current_frames()
        for ident in set(frames) - self._python_threads:
            frame = frames[ident]
            where = f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}"
            label = f"a Python thread (now at {where})"
            if not any(where in seen for seen in found):
                found.append(label)
        if threading.getprofile() is not self._profile_hook:
            found.append("the thread monitor was removed")
        native = _native_threads() - self._native
        extra = len(native) - len(set(frames) - self._python_threads)
        if extra > 0 and not found:
            names = sorted(_thread_name(t) for t in native)
            found.append(f"{extra} native thread(s) ({', '.join(names)})")
        return found

    # -- audit hook callbacks -------------------------------------------------------------------------------------
    def _candidate_frame(self, innermost_only: bool) -> str | None:
        """'file:line' of the candidate's frame on the stack; with innermost_only, only when the innermost frame
        outside the standard library (and this module) is the candidate's, so a trusted library's own spawn
        (Triton running ptxas) does not count."""
        frame = sys._getframe(2)
        while frame is not None:
            filename = os.path.realpath(frame.f_code.co_filename) if not frame.f_code.co_filename.startswith("<") \
                else frame.f_code.co_filename
            if _inside(filename, self.candidate_dir):
                return f"{os.path.relpath(filename, self.candidate_dir)}:{frame.f_lineno}"
            trusted = filename == _THIS_FILE or filename.startswith("<") or filename.startswith(_STDLIB)
            if innermost_only and not trusted:
                return None
            frame = frame.f_back
        return None

    def _saw_write(self, what: str, path: Any) -> None:
        real = _real(path)
        if any(_inside(real, d) for d in self.allowed_dirs):
            return
        where = self._candidate_frame(innermost_only=False)
        if where:
            self.events.append(("runtime.file_access", f"{where} wrote {real} ({what}): outside the candidate's "
                                                       "folder and the temp and compiler-cache folders"))

    def _saw_spawn(self, event: str, args: tuple) -> None:
        where = self._candidate_frame(innermost_only=True)
        if where:
            detail = " ".join(str(a) for a in args[:2])[:120]
            self.events.append(("runtime.file_access", f"{where} did {event} ({detail}): a kernel may not start "
                                                       "processes, signal them or open sockets"))

    # -- the verdict ----------------------------------------------------------------------------------------------
    def verify(self, stage: str) -> None:
        """Raise the first finding since creation: file writes/spawns, replaced functions, then threads."""
        if self.events:
            rule, message = self.events[0]
            raise Rejection(rule, f"during {stage}: {message}")
        replaced = self._replaced()
        if replaced:
            names = ", ".join(replaced[:3]) + (f" (+{len(replaced) - 3} more)" if len(replaced) > 3 else "")
            raise Rejection("runtime.timer_patched", f"during {stage}: {names} replaced; the evaluator's timers and "
                                                     "scoring functions must stay as they were")
        threads = self._thread_findings()
        if threads:
            raise Rejection("runtime.thread", f"during {stage}: the candidate started {'; '.join(threads)}")

    def close(self) -> None:
        """Stop recording (the audit hook itself stays: Python cannot remove one)."""
        if self in _active:
            _active.remove(self)
        if threading.getprofile() is self._profile_hook:
            threading.setprofile(None)


def _trusted_dirs() -> tuple[str, ...]:
    dirs = list(_STDLIB)
    for name in ("torch", "triton", "avo"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            dirs.append(os.path.dirname(os.path.realpath(module.__file__)) + os.sep)
    return tuple(dirs)


def _same_function(original: Any, current: Any) -> bool:
    """torch rebinds some functions to wrappers of themselves on first use (its dynamo-disabling decorator). Such a
    rebinding keeps the module and qualified name, and every function in its `__wrapped__` chain lives in a library's
    own files; a replacement written by the candidate cannot meet both."""
    if current is None or type(original) is not type(current):
        return False
    for attr in ("__module__", "__qualname__"):
        if getattr(original, attr, None) != getattr(current, attr, None):
            return False
    trusted = _trusted_dirs()
    seen = 0
    while current is not None and seen < 8:
        code = getattr(current, "__code__", None)
        if code is None or not os.path.realpath(code.co_filename).startswith(trusted):
            return False
        current, seen = getattr(current, "__wrapped__", None), seen + 1
    return True


def _static_lookup(cls: type, attr: str) -> Any:
    """The raw attribute as stored in the class or the first base that has it (no descriptor binding)."""
    for klass in cls.__mro__:
        if attr in vars(klass):
            return vars(klass)[attr]
    return None


def _current(owner: str, attr: str) -> Any:
    module = sys.modules.get(owner)
    if module is not None:
        return vars(module).get(attr)
    module_name, _, cls_name = owner.rpartition(".")
    cls = getattr(sys.modules.get(module_name), cls_name, None)
    return _static_lookup(cls, attr) if isinstance(cls, type) else None


def _thread_name(tid: str) -> str:
    try:
        return Path(f"/proc/self/task/{tid}/comm").read_text().strip()
    except OSError:
        return tid
