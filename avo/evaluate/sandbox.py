"""The OS sandbox every evaluation worker and the shell tool run in: bubblewrap (`bwrap`).

Inside, a process has its own PID namespace (when the sandbox's first process ends, the kernel kills everything it
started, `setsid` or not, and nothing of avo's is visible in its `/proc`), no network, no capabilities, a read-only
view of the system, a fresh `/tmp` and `/dev` (the NVIDIA device nodes bound in), tmpfs over the folders that hold
the user's and the run's data (`$HOME`, `/root`, the runs folder, and the folder avo was started in: a project's or
avo's own checkout, whose `.env` may hold keys; the Python install and avo's package under them are bound back
read-only), and write access only to the folders the caller names.

Why bubblewrap rather than namespaces and Landlock set up by hand: unsharing the PID namespace needs a fork after
`unshare()` and a reaping init inside, and a mount namespace needs the bind/remount/tmpfs sequence in the right
order with its error cases; bubblewrap is the small, audited program that does exactly this (Flatpak's), works as
root and, where user namespaces are allowed, as a user, and is one `apt-get install` away. Landlock confines files
only (no PID or network namespace) and needs kernel 5.13+ with it enabled, which the GPU machines do not promise.

`bwrap` is found at `$AVO_BWRAP` (a path, for machines where it is not on PATH), else on PATH, and tried once
(`why_unavailable`): a bwrap that cannot create its namespaces here counts as none.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import shutil
import site
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from avo.errors import UserError
from avo.util import janitor
from avo.util.cache import cache_root

ENV_VAR = "AVO_BWRAP"
INSTALL = f"apt-get install bubblewrap, or set {ENV_VAR}=/path/to/bwrap"
BASE = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--unshare-pid",
        "--unshare-net", "--unshare-ipc", "--die-with-parent", "--new-session", "--cap-drop", "ALL")
"""Every sandbox: a read-only system, its own /dev, /proc and /tmp, no other process, network, IPC or capability
(root without CAP_SYS_ADMIN cannot remount the read-only view writable)."""
GPU_NODES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/dri")
SYSTEM = tuple(Path(p) for p in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/dev",
                                 "/proc", "/sys", "/run", "/boot"))
"""Folders the sandbox's programs read from where they lie: never masked as avo's working folder."""


def find() -> str | None:
    """The bwrap program: `$AVO_BWRAP` if set (refused when it is not an executable file), else bwrap on PATH."""
    given = os.environ.get(ENV_VAR)
    if given:
        return given if os.path.isfile(given) and os.access(given, os.X_OK) else None
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=4)
def _trial(path: str) -> str | None:
    try:
        done = subprocess.run([path, *BASE, "--", "/bin/true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{path} does not run ({type(exc).__name__})"
    if done.returncode != 0:
        return f"{path} cannot create its namespaces here: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
    return None


def why_unavailable() -> str | None:
    """None when a working sandbox is here; else why not, in a few words (what to do: INSTALL)."""
    given = os.environ.get(ENV_VAR)
    path = find()
    if path is None:
        return f"{ENV_VAR}={given} is not an executable file" if given else "bwrap (bubblewrap) is not installed"
    return _trial(path)


def available() -> bool:
    return why_unavailable() is None


def wanted(mode: str) -> bool:
    """Whether to sandbox under config mode `mode`: on (refused in one line without a sandbox), off, or auto (when
    one is here)."""
    if mode == "off":
        return False
    why = why_unavailable()
    if mode == "on" and why is not None:
        raise UserError(f"the sandbox is required but {why}: {INSTALL}")
    return why is None


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def hidden_roots(hide: Sequence[Path] = ()) -> list[Path]:
    """Folders replaced by an empty tmpfs: the home folder, /root and `hide` (the runs folder), where they exist."""
    roots = [Path.home(), Path("/root"), *hide]
    resolved = []
    for root in roots:
        real = Path(os.path.realpath(root))
        if real.is_dir() and real != Path("/") and real not in resolved:
            resolved.append(real)
    return resolved


@functools.lru_cache(maxsize=4)
def _interpreter_path(executable: str, pythonpath: str) -> tuple[str, ...]:
    """The import path of a new `executable` started here as a worker is (`-m`/`-c`, `pythonpath` in its
    environment): the standard library, site-packages, PYTHONPATH and what .pth files add, less the first entry,
    the folder it starts in. Not this process's sys.path: its first entry is the folder of the script avo was
    started from, or with `python -m avo` the working folder (a project's, the home folder), which may hold the
    user's secrets and which no worker imports from. The probe starts in /, so that an empty PYTHONPATH entry (a
    trailing colon), which a worker reads as its own working folder, does not name avo's. Where the probe fails,
    site-packages and PYTHONPATH. `pythonpath` is this process's (the probe inherits it); it keys the cache."""
    try:
        done = subprocess.run([executable, "-c", "import json, sys; print(json.dumps(sys.path[1:]))"],
                              capture_output=True, text=True, timeout=60, cwd="/")
        return tuple(json.loads(done.stdout.splitlines()[-1]))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return (*site.getsitepackages(), site.getusersitepackages(), *pythonpath.split(os.pathsep))


def _needed() -> list[Path]:
    """What a Python worker reads that may lie under a hidden folder: the interpreter and the packages it imports
    (`_interpreter_path`), avo's package (the `avo` folder alone: in a checkout, not what lies beside it), avo's
    cache (KernelBench measurements; read-only, so no candidate can plant one) and the CUDA toolkit nvcc is found
    in."""
    from avo.evaluate.cuda_compile import find_nvcc

    imports = _interpreter_path(sys.executable, os.environ.get("PYTHONPATH", ""))
    nvcc = find_nvcc()
    toolkit = [Path(os.path.realpath(nvcc)).parents[1]] if nvcc else []
    paths = [sys.prefix, sys.base_prefix, Path(__file__).parents[1], cache_root(), *imports, *toolkit]
    real = [Path(os.path.realpath(p)) for p in paths if p and os.path.isabs(str(p))]
    return [p for p in real if p != Path("/")]  # the system is shown read-only as it is


def _workdir(needed: Sequence[Path]) -> list[Path]:
    """The folder avo runs in, to be masked: a project's, whose `.env` (or any file) may hold the user's keys outside
    the home folder, avo's own checkout included. Not where masking it would hide what the sandbox runs on: the root,
    a system folder, or a folder inside one a worker needs (avo's package, its Python install); what a worker needs
    inside it (avo's package in a checkout, a virtual environment in a project) is bound back as under the home
    folder."""
    try:
        here = Path(os.path.realpath(os.getcwd()))
    except OSError:  # the folder was removed under avo: nothing there to hide
        return []
    return [] if here == Path("/") or _inside(here, [*SYSTEM, *needed]) else [here]


def command(cmd: Sequence[str], *, writable: Sequence[Path], cwd: Path, hide: Sequence[Path] = (),
            readable: Sequence[Path] = (), bwrap: str | None = None, cwd_as: str | None = None) -> list[str]:
    """`cmd` wrapped in bwrap: `writable` folders bound read-write, `readable` files or folders (e.g. a task file)
    read-only, the hidden roots masked; it starts in `cwd`, or with `cwd_as` (a path under /tmp) in `cwd` bound there
    too, so that every sandbox started so sees the same working directory. Where a path the worker needs lies
    under a masked root, it is bound back read-only; a masked root inside it (a checkout under /tmp or the home
    folder that holds the runs folder) is masked again on top of it. `readable` paths are bound last: a candidate
    folder inside the runs folder stays readable, the rest of the runs folder does not. Building one starts this avo's
    janitor (avo.util.janitor), if it runs not yet: run the command through procs.popen, which marks it."""
    bwrap = bwrap or find()
    if bwrap is None:
        raise UserError(f"no sandbox: {why_unavailable()}: {INSTALL}")
    janitor.ensure()  # bwrap's init asks to die with avo only once set up: before, only the janitor would kill it
    needed = _needed()
    masked = list(dict.fromkeys([Path("/tmp"), *hidden_roots(hide), *_workdir(needed)]))
    args = [bwrap, *BASE]
    for pattern in GPU_NODES:
        for node in sorted(glob.glob(pattern)):
            args += ["--dev-bind", node, node]
    for root in masked[1:]:
        args += ["--tmpfs", str(root)]
    # A masked folder itself is never bound back (a PYTHONPATH of $HOME would show all of it): only what lies in it.
    shown = [p for p in (Path(os.path.realpath(p)) for p in readable) if p not in masked]
    wanted = [p for p in dict.fromkeys([*needed, *shown])
              if p.exists() and p not in masked and (_inside(p, masked) or p in shown)]
    bound = sorted(wanted, key=lambda p: len(p.parts))  # a folder before what lies in it
    for path in bound:
        args += ["--ro-bind", str(path), str(path)]
    remasked = [root for root in masked if any(b != root and b in root.parents for b in bound)]
    for root in remasked:  # bound back with what it holds: masked again
        args += ["--tmpfs", str(root)]
    for path in shown:  # a readable folder inside one of those (a candidate inside the runs folder)
        if _inside(path, remasked):
            args += ["--ro-bind", str(path), str(path)]
    for path in writable:
        real = os.path.realpath(path)
        args += ["--bind", real, real]
    start = os.path.realpath(cwd)
    if cwd_as is not None:
        if Path("/tmp") not in Path(cwd_as).parents:
            raise ValueError(f"cwd_as must lie under the sandbox's own /tmp, not {cwd_as}")
        args += ["--bind", start, cwd_as]
        start = cwd_as
    args += ["--chdir", start, "--", *cmd]
    return args
