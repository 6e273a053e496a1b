"""The compile caches a sandboxed worker starts with: what a worker builds before any candidate exists in it.

Each sandboxed worker has private, fresh Triton/CuPy/Inductor caches and driver JIT cache (worker_process.CACHES),
since a binary one candidate planted in a shared cache would run as another's. Fresh, they cost every worker the
same builds: Triton's driver stub (`cuda_utils`, gcc), before Triton 3.9 the warm-up kernel's launcher (gcc again),
the warm-up kernel itself (seen on the H200: 5.9 s start-up sandboxed, 3.7 s not), the library's kernels the driver
compiles from PTX (cuDNN's, per attention shape). Those builds are trusted when they come from a
set-up-only worker: one that finished its set-up (`prepare`: avo's code and the task's) and was never sent a request,
so no candidate code ever ran in it; it is killed before its caches are copied out (`take`), so nothing writes them
during the copy. The copy lives under avo's cache root (`trusted-caches/<key>`, or `$AVO_TRUSTED_CACHE_DIR/<key>`),
which a sandbox sees read-only at most, and each new worker gets its own copy of it (`seed`) before it starts:
regular files written anew, never links, so what a candidate writes into its cache reaches neither the trusted copy
nor any other worker.

The key is what the builds depend on: Triton's, torch's and Python's versions, the interpreter, the device and GPU
kind, and the environment a build reads (compiler, CUDA, Triton variables); a toolchain change builds a new copy.
Triton's group files (`__grp__*.json`) name their members by absolute path, the dead worker's box: they are stored
relative and made absolute again in each box.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import stat
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from avo.util import procs, safe_files
from avo.util.cache import cache_root

FOLDER = "trusted-caches"
ENV_VAR = "AVO_TRUSTED_CACHE_DIR"
"""Where the trusted copies live instead of `<cache root>/trusted-caches` (the test suite shares one folder across
its modules' private cache roots, so each module does not set a worker up for nothing but its builds)."""
ENV_PREFIXES = ("TRITON_", "CUDA_", "NVIDIA_", "CUPY_", "TORCHINDUCTOR_", "TORCH_CUDA_ARCH", "NVCC_")
ENV_NAMES = ("CC", "CXX", "PATH", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH")
ENV_IGNORED = ("CUDA_VISIBLE_DEVICES", "CUDA_CACHE_PATH")
"""Which GPU of a kind a worker uses changes no build (the GPU kind is keyed from the set-up), nor do the cache
folders' own locations (every `*_CACHE_DIR`, and the driver's `CUDA_CACHE_PATH`)."""
GROUP_PREFIX = "__grp__"
_lock = threading.Lock()
_failed: set[str] = set()
"""Keys whose set-up-only worker failed in this process: workers start with empty caches, as before, and no later
worker pays for another try."""


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def key(setup: dict, env: dict[str, str]) -> str:
    """What the set-up's builds depend on, as a short digest."""
    relevant = {name: value for name, value in sorted(env.items())
                if (name in ENV_NAMES or name.startswith(ENV_PREFIXES)) and name not in ENV_IGNORED
                and not name.endswith("_CACHE_DIR")}
    facts = {"python": sys.version, "executable": sys.executable, "machine": platform.machine(),
             "triton": _version("triton"), "torch": _version("torch"), "device": setup.get("device"),
             "gpu": setup.get("gpu"), "env": relevant}
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:24]


def folder(digest: str) -> Path:
    root = os.environ.get(ENV_VAR)
    return (Path(root).expanduser() if root else cache_root() / FOLDER) / digest


def existing(digest: str) -> Path | None:
    path = folder(digest)
    return path if path.is_dir() else None


def ensure(digest: str, build: Callable[[Path], bool]) -> Path | None:
    """The trusted copy for `digest`, made first where there is none: `build(dest)` fills the empty folder `dest`
    and says whether it succeeded. One build at a time in this process; another process building the same key at
    once loses nothing (the first folder renamed into place is kept). None if the build failed."""
    with _lock:
        if (path := existing(digest)) is not None:
            return path
        if digest in _failed:
            return None
        final = folder(digest)
        scratch = final.parent / f"avo-building-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            procs.sweep_stale(final.parent)  # what a killed avo left half built
            scratch.mkdir()
            built = build(scratch)
            if built:
                try:
                    os.rename(scratch, final)
                except OSError:  # another process put its copy there first
                    pass
        except OSError:  # a cache root avo cannot write: the workers start with empty caches, as before
            built = False
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if not built:
            _failed.add(digest)
        return existing(digest)


def _in_flight(rel: str, is_dir: bool) -> bool:
    """Triton writes a cache entry in a `tmp.pid_*` folder and renames it into place: one left there is torn."""
    return is_dir and rel.rsplit("/", 1)[-1].startswith("tmp.pid_")


def take(cache: Path, dest: Path) -> bool:
    """Copy a set-up-only worker's caches (its box's `cache/`, the process already killed) into `dest`; False,
    with nothing copied, where any entry is not a regular file (nothing avo's set-up makes)."""
    if not cache.is_dir():
        return True  # nothing was built (the interpreter): an empty copy, so no later worker tries again
    try:
        files = safe_files.regular_files(cache, _in_flight)
    except safe_files.UnsafeFile:
        return False
    dest.mkdir(parents=True, exist_ok=True)
    for rel, st in files:
        data = safe_files.read_bytes(cache, rel)
        if _is_group(rel):
            data = _group_paths(data, lambda path: _relative(path, cache))
            if data is None:
                continue  # a member outside the cache: Triton compiles that kernel again
        safe_files.write_bytes(dest, rel, data, executable=bool(st.st_mode & stat.S_IXUSR), new=True)
    return True


def seed(trusted: Path, cache: Path) -> bool:
    """Give a new worker's cache folder (`cache/` in its box, before it starts) its own copy of the trusted one;
    False, and the folder removed, where the trusted copy holds something other than regular files or cannot be
    read (the worker then starts with empty caches)."""
    try:
        _copy_in(trusted, cache)
    except (safe_files.UnsafeFile, OSError):
        shutil.rmtree(cache, ignore_errors=True)
        return False
    return True


def _copy_in(trusted: Path, cache: Path) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    for rel, st in safe_files.regular_files(trusted):
        data = safe_files.read_bytes(trusted, rel)
        if _is_group(rel):
            data = _group_paths(data, lambda rel: _absolute(rel, cache))
            if data is None:
                continue
        safe_files.write_bytes(cache, rel, data, executable=bool(st.st_mode & stat.S_IXUSR), new=True)


def _is_group(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return name.startswith(GROUP_PREFIX) and name.endswith(".json")


def _relative(path: str, cache: Path) -> str | None:
    """`path` (a member in a worker's box) relative to its cache folder, or None if it lies elsewhere."""
    for root in dict.fromkeys([cache, Path(os.path.realpath(cache))]):
        try:
            rel = Path(os.path.normpath(path)).relative_to(root)
        except ValueError:
            continue
        return rel.as_posix() if ".." not in rel.parts else None
    return None


def _absolute(rel: str, cache: Path) -> str | None:
    parts = Path(rel).parts
    return None if Path(rel).is_absolute() or ".." in parts or not parts else str(cache / rel)


def _group_paths(data: bytes, move: Callable[[str], str | None]) -> bytes | None:
    """A Triton group file with every member's path moved by `move`; None where one cannot be."""
    try:
        group = json.loads(data)
        members = {name: move(path) for name, path in group["child_paths"].items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if any(not isinstance(path, str) for path in members.values()):
        return None
    return json.dumps(dict(group, child_paths=members)).encode()
