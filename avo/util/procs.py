"""Child processes and temp folders that outlive nothing: the one place avo starts a program or makes scratch space.

Every child runs in a session of its own, so a timeout kills its whole group (compilers and kernels it started), and
is set to receive SIGKILL when avo dies (Linux `PR_SET_PDEATHSIG`), so a `kill -9` of avo leaves no evaluation
worker, profiler or compile capture running under PID 1. Each carries avo's mark in its environment, by which the
janitor finds what that signal misses (janitor.py: a sandbox's init in its first milliseconds). Temp folders are
named `avo-<kind>-<pid>-*`; one whose PID is gone belonged to a killed avo and is swept at the next start
(`sweep_stale`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from avo.util import janitor

PR_SET_PDEATHSIG = 1
_STALE = re.compile(r"avo-[a-z]+-(\d+)-")
_libc = None
if sys.platform.startswith("linux"):
    try:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:  # pragma: no cover - a libc without prctl: children are still killed by group on timeout
        _libc = None


def pid_alive(pid: int) -> bool:
    """Whether a process with this PID exists (one owned by another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def die_with_parent(parent: int | None = None) -> None:
    """Ask the kernel to SIGKILL this process when its parent exits. Run in the child (as Popen's preexec_fn, or
    first thing in a child of avo's that is started by another program, e.g. under ncu). If the parent is already
    gone (`parent` given and no longer ours), exit now."""
    if _libc is not None:
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def popen(cmd, *, env: dict | None = None, **kwargs) -> subprocess.Popen:
    """`subprocess.Popen` in a new session, dying with avo: also when avo dies between the fork and the child's
    request to die with it (the child, no longer avo's, exits before it runs `cmd`). `env` (default: avo's) gets
    avo's mark (janitor.owner_env)."""
    return subprocess.Popen(cmd, start_new_session=True, preexec_fn=functools.partial(die_with_parent, os.getpid()),
                            env=janitor.owner_env(env), **kwargs)


def kill_group(proc: subprocess.Popen, wait_s: float = 10.0) -> None:
    """SIGKILL the child's whole process group; harmless if it is already gone."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        pass


def run(cmd, *, timeout_s: float, cwd: Path | None = None, env: dict | None = None,
        merge_stderr: bool = True) -> tuple[int | None, str, str]:
    """(exit code, or None after the timeout killed the group; stdout; stderr) of `cmd`."""
    proc = popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                 text=True, errors="replace", cwd=cwd, env=env)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        return None, out or "", err or ""
    finally:
        if proc.poll() is None:  # interrupted (Ctrl-C): take the group down with us
            kill_group(proc)
    return proc.returncode, out or "", err or ""


def temp_dir(kind: str) -> tempfile.TemporaryDirectory:
    """A scratch folder `avo-<kind>-<pid>-*` in the system temp directory, removed on exit, swept if avo is killed."""
    return tempfile.TemporaryDirectory(prefix=f"avo-{kind}-{os.getpid()}-")


def sweep_stale(root: Path | None = None) -> list[str]:
    """Remove the temp folders of avo processes that are gone; returns their names."""
    root = Path(root or tempfile.gettempdir())
    swept = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return swept
    for entry in entries:
        match = _STALE.match(entry.name)
        if not match or int(match.group(1)) == os.getpid() or pid_alive(int(match.group(1))):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        swept.append(entry.name)
    return swept


STDERR_MARK = "--- stderr (tail) ---"
"""Between a crashed child's one-line cause and the tail of its stderr, in the messages that carry both (the
evaluator's crash results; the KernelBench sweep reads the tail's last line back)."""
