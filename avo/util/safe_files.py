"""Files of folders a candidate could have touched (its folder, the workspace), read and written by avo as regular
files only.

A symlink, a hard link (a regular file with more than one name: the other may be anywhere), a FIFO, a socket or a
device is refused with what it is (`UnsafeFile`), never followed or opened: a link would make avo read or write a
file outside the folder, a FIFO would block avo on open. Paths are opened one component at a time from the folder
with O_NOFOLLOW (and O_NONBLOCK, so nothing blocks), and what was opened is checked again with fstat: a file swapped
between the check and the open is refused too.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

Skip = Callable[[str, bool], bool]
"""skip(relative posix path, is_dir): leave the entry out without inspecting or opening it."""

_NOFOLLOW = os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class UnsafeFile(ValueError):
    """A folder entry avo refuses to read or write: `rel` (its path in the folder) is `what`."""

    def __init__(self, rel: str, what: str):
        super().__init__(f"{rel} is {what}: only regular files are read or written (links are not followed)")
        self.rel, self.what = rel, what


def unsafe_kind(st: os.stat_result) -> str | None:
    """What makes an entry (its lstat) unsafe, or None for a regular file with one name or a directory."""
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        return None
    if stat.S_ISREG(mode):
        return f"a hard link ({st.st_nlink} names)" if st.st_nlink > 1 else None
    kinds = {stat.S_ISLNK: "a symlink", stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket",
             stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device"}
    return next((what for test, what in kinds.items() if test(mode)), "not a regular file")


def scan(root: Path, skip: Skip | None = None) -> tuple[list[tuple[str, os.stat_result]], list[UnsafeFile]]:
    """(regular files as (relative posix path, lstat), refused entries) under `root`, sorted by path. Nothing is
    followed or opened; a symlink to a directory is refused like any symlink."""
    files: list[tuple[str, os.stat_result]] = []
    refused: list[UnsafeFile] = []
    _scan(Path(root), "", skip or (lambda rel, is_dir: False), files, refused)
    return sorted(files, key=lambda f: f[0]), sorted(refused, key=lambda r: r.rel)


def regular_files(root: Path, skip: Skip | None = None) -> list[tuple[str, os.stat_result]]:
    """The regular files of `root` as scan() finds them; UnsafeFile for the first entry that is not one."""
    files, refused = scan(root, skip)
    if refused:
        raise refused[0]
    return files


def _scan(root: Path, prefix: str, skip: Skip, files: list, refused: list) -> None:
    with os.scandir(root / prefix if prefix else root) as entries:
        for entry in entries:
            rel = f"{prefix}{entry.name}"
            st = entry.stat(follow_symlinks=False)
            is_dir = stat.S_ISDIR(st.st_mode)
            if skip(rel, is_dir):
                continue
            if is_dir:
                _scan(root, rel + "/", skip, files, refused)
            elif (what := unsafe_kind(st)) is not None:
                refused.append(UnsafeFile(rel, what))
            else:
                files.append((rel, st))


def read_file(root: Path, rel: str, limit: int | None = None) -> tuple[bytes, os.stat_result]:
    """(bytes, fstat) of the regular file `rel` under `root`; at most limit + 1 bytes when a limit is given."""
    with _opened(root, rel, os.O_RDONLY, create=False) as (fd, st):
        chunks, left = [], float("inf") if limit is None else limit + 1
        while left > 0 and (chunk := os.read(fd, int(min(left, 1 << 20)))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks), st


def read_bytes(root: Path, rel: str) -> bytes:
    return read_file(root, rel)[0]


def write_bytes(root: Path, rel: str, data: bytes, *, executable: bool | None = None, new: bool = False) -> None:
    """Create or replace the contents of `rel` under `root` (its folders made as needed), never through a link:
    an existing entry that is not a regular file with one name is refused, and its target left as it was. `new`:
    the file must not exist yet."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if new else 0)  # no O_TRUNC: it would cut a link's target
    with _opened(root, rel, flags, create=True) as (fd, _):
        os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if executable is not None:
            os.fchmod(fd, 0o755 if executable else 0o644)


def remove(root: Path, rel: str) -> None:
    """Unlink the entry `rel` under `root` (a link's name, never its target; the folders on the way not followed)."""
    parts = _parts(rel)
    with _folder(root, parts[:-1], create=False) as dir_fd:
        os.unlink(parts[-1], dir_fd=dir_fd)


def copy_tree(src: Path, dest: Path, skip: Skip | None = None) -> None:
    """Copy the regular files of `src` into `dest` (new or empty), executable bits kept; UnsafeFile, before
    anything is written, for the first entry of `src` that is not a regular file."""
    files = regular_files(src, skip)
    Path(dest).mkdir(parents=True, exist_ok=True)
    for rel, _ in files:
        data, st = read_file(src, rel)
        write_bytes(dest, rel, data, executable=bool(st.st_mode & stat.S_IXUSR), new=True)


def _parts(rel: str) -> list[str]:
    parts = [p for p in PurePosixPath(rel).parts if p != "."]
    if not parts or PurePosixPath(rel).is_absolute() or ".." in parts:
        raise ValueError(f"'{rel}' is not a path inside the folder")
    return parts


@contextmanager
def _folder(root: Path, parts: list[str], *, create: bool) -> Iterator[int]:
    """A descriptor of the folder `parts` under `root`, each step opened with O_NOFOLLOW (made when `create`)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)
    try:
        for i, part in enumerate(parts):
            if create:
                try:
                    os.mkdir(part, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                step = os.open(part, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                _refuse_entry(fd, part, "/".join(parts[:i + 1]), exc)
                raise
            os.close(fd)
            fd = step
        yield fd
    finally:
        os.close(fd)


@contextmanager
def _opened(root: Path, rel: str, flags: int, *, create: bool) -> Iterator[tuple[int, os.stat_result]]:
    parts = _parts(rel)
    with _folder(root, parts[:-1], create=create) as dir_fd:
        name = parts[-1]
        try:  # checked before opening: a device or FIFO is never opened
            what = unsafe_kind(os.stat(name, dir_fd=dir_fd, follow_symlinks=False))
        except FileNotFoundError:
            if not create:
                raise
            what = None
        if what is not None:
            raise UnsafeFile(rel, what)
        try:
            fd = os.open(name, flags | _NOFOLLOW, 0o644, dir_fd=dir_fd)
        except OSError as exc:
            _refuse_entry(dir_fd, name, rel, exc)
            raise
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, "is a directory", rel)
            if (what := unsafe_kind(st)) is not None:  # swapped in since the check
                raise UnsafeFile(rel, what)
            yield fd, st
        finally:
            os.close(fd)


def _refuse_entry(dir_fd: int, name: str, rel: str, exc: OSError) -> None:
    """UnsafeFile when an open failed because the entry is a link or a special file (ELOOP, ENOTDIR, ENXIO)."""
    try:
        what = unsafe_kind(os.stat(name, dir_fd=dir_fd, follow_symlinks=False))
    except OSError:
        return
    if what is not None:
        raise UnsafeFile(rel, what) from exc
