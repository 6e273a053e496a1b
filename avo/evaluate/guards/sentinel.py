"""Sentinel: created in the worker before the candidate is imported; `verify(stage)` says whether the candidate has
replaced a timer or scoring function, started a thread, or written outside its folder / started a process since.

Functions are compared by identity with what was captured at creation, so a replacement is seen however it was made
(assignment, setattr, a swapped sys.modules entry). Threads are compared with a baseline taken after torch's own
thread pools (and CUDA's) were started. File writes and process spawns are seen through an audit hook
(audit.py); they count when a frame of the candidate's code is on the stack.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import avo.evaluate.guards.audit as audit  # the module itself: the package's __init__ imports this one
from avo.evaluate.guards.rules import Rejection

# Modules and classes whose functions the evaluator measures or scores with. Missing ones are skipped.
_WATCHED_MODULES = (
    "time", "torch", "torch.cuda", "torch.linalg", "torch.testing", "torch.nn.functional", "triton.testing",
    "threading", "avo.tasks", "avo.tasks.base", "avo.tasks.gemm", "avo.tasks.attention", "avo.evaluate.worker.timing",
    "avo.evaluate.worker.evaluation", "avo.evaluate.worker.candidate", "avo.evaluate.worker.correctness",
    "avo.evaluate.worker.check", "avo.evaluate.worker.bench", "avo.evaluate.worker.loader",
    "avo.evaluate.guards", "avo.evaluate.guards.runtime", "avo.evaluate.guards.audit", "avo.evaluate.guards.sentinel",
    "avo.evaluate.result",
)
_WATCHED_CLASSES = ("torch.Tensor", "torch.cuda.Event", "torch.cuda.Stream", "threading.Thread")


def _warm_runtime() -> None:
    """Start torch's intra-op pool and CUDA's helper threads, and let torch's first entry into a dispatch mode happen,
    now: so that all of it belongs to the baseline."""
    import torch

    from avo.evaluate.guards.modes import evaluator_mode

    class _Warm(evaluator_mode()):
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
    except OSError:  # not Linux: the Python-level checks only
        return set()


class Sentinel:
    """Watch the process for the candidate's side effects; `verify(stage)` raises the first one seen."""

    def __init__(self, candidate_dir: Path, *, allowed_dirs: tuple[Path, ...] = ()):
        self.candidate_dir = os.path.realpath(candidate_dir)
        home = Path.home()
        self.allowed_dirs = tuple(
            os.path.realpath(d)
            for d in (
                self.candidate_dir,
                tempfile.gettempdir(),
                os.environ.get("TRITON_CACHE_DIR") or home / ".triton",
                Path(os.environ.get("TRITON_HOME") or home) / ".triton",
                os.environ.get("CUPY_CACHE_DIR") or home / ".cupy",
                *allowed_dirs,
            )
        ) + ("/dev/null",)
        self.events: list[tuple[str, str]] = []  # (rule, message), in the order seen
        _warm_runtime()
        self._functions = self._capture()
        self._python_threads = set(sys._current_frames())
        self._native = _native_threads()
        self._thread_log_start = len(audit.thread_starts)
        audit.install(self._listen)

    # -- timers and scoring functions ---------------------------------------------------------------------------
    def _capture(self) -> dict[str, Any]:
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
            if isinstance(cls, type):
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
    def _mine(self, files: list[str]) -> bool:
        """A thread belongs to this candidate unless its code is provably another candidate's."""
        if any(audit.inside(f, self.candidate_dir) for f in files):
            return True
        others = [listener.__self__.candidate_dir for listener in audit._listeners
                  if getattr(listener, "__self__", self) is not self]
        return not any(audit.inside(f, d) for f in files for d in others)

    def _thread_findings(self) -> list[str]:
        found = [text for text, files in audit.thread_starts[self._thread_log_start:] if self._mine(files)]
        frames = sys._current_frames()
        new = set(frames) - self._python_threads
        for ident in new if not found else ():  # threads `threading` did not start (or not yet noted)
            stack, frame = [], frames[ident]
            while frame is not None:
                stack.append(os.path.realpath(frame.f_code.co_filename))
                frame = frame.f_back
            if self._mine(stack):
                here = frames[ident]
                found.append(f"a thread (now at {Path(here.f_code.co_filename).name}:{here.f_lineno})")
        if threading.getprofile() is not audit.on_thread_start:
            found.append("something that removed the evaluator's thread monitor")
        native = _native_threads() - self._native
        if len(native) > len(new) and not found:
            names = sorted(_thread_name(t) for t in native)
            found.append(f"{len(native) - len(new)} native thread(s) ({', '.join(names)})")
        return found

    # -- audit hook -----------------------------------------------------------------------------------------------
    def _listen(self, kind: str, what: str, payload: Any) -> None:
        caller = sys._getframe(3)  # past _tell and the audit hook
        if kind == "write":
            path = audit.real(payload)
            if any(audit.inside(path, d) for d in self.allowed_dirs):
                return
            where = audit.frame_in(self.candidate_dir, caller, innermost_only=False)
            if where:
                self._refuse(f"{where} wrote {path} ({what}): outside the candidate's folder and the temp and "
                             "compiler-cache folders")
        else:
            where = audit.frame_in(self.candidate_dir, caller, innermost_only=True)
            if where:
                detail = " ".join(str(a) for a in payload[:2])[:120]
                self._refuse(f"{where} did {what} ({detail}): a kernel may not start processes, signal them or "
                             "open sockets")

    def _refuse(self, message: str) -> None:
        """Record, then stop the operation itself: an audit hook that raises aborts the event. If the candidate
        swallows the exception, the record still rejects it at the next verify."""
        self.events.append(("runtime.file_access", message))
        raise Rejection("runtime.file_access", message)

    # -- the verdict ----------------------------------------------------------------------------------------------
    def verify(self, stage: str) -> None:
        """Raise the first finding since creation: file writes and spawns, replaced functions, then threads."""
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
        """Stop listening (the audit hook itself stays: Python cannot remove one)."""
        audit.uninstall(self._listen)


def findings() -> int:
    """How many findings the active Sentinels of this process hold (a forked compile child checks that its compile
    added none)."""
    return sum(len(getattr(getattr(listener, "__self__", None), "events", ())) for listener in audit._listeners)


def _trusted_dirs() -> tuple[str, ...]:
    dirs = []
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
    for _ in range(8):
        code = getattr(current, "__code__", None)
        if code is None or not os.path.realpath(code.co_filename).startswith(trusted):
            return False
        current = getattr(current, "__wrapped__", None)
        if current is None:
            return True
    return False


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
