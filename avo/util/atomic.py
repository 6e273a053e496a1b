"""Files that readers see whole: the old version or the new one, never a torn one, whenever the writer dies."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def replacing(path: Path, tmp_dir: Path | None = None) -> Iterator[Path]:
    """A temp path to write the new `path` to (beside it, or in `tmp_dir` on the same file system); fsynced and
    renamed over `path` when the block ends, removed if it raises."""
    path = Path(path)
    tmp = Path(tmp_dir or path.parent) / f".{path.name}.{os.getpid()}.tmp"
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str, tmp_dir: Path | None = None) -> None:
    """`text` into `path` through a temp file (see `replacing`)."""
    with replacing(path, tmp_dir) as tmp:
        tmp.write_text(text, encoding="utf-8")
