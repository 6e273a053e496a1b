"""The lock of a run directory: one process drives a run at a time.

The lock is an flock on `runs/<id>/lock`, so the kernel releases it on any exit, SIGKILL included; the file also
holds the holder's PID, host and start time, for the message another process gets and for `avo runs`. A process that
takes over from a holder that died says so through `on_takeover`. Nested `hold()` calls in one process are counted,
not re-locked.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from avo.errors import UserError
from avo.util.procs import pid_alive


class RunLock:
    def __init__(self, path: Path, run_id: str, *, clock: Callable[[], str],
                 on_takeover: Callable[[dict], None] | None = None):
        self.path, self.run_id, self._clock, self._on_takeover = path, run_id, clock, on_takeover
        self._depth = 0

    @contextmanager
    def hold(self) -> Iterator[None]:
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = self._content() or {}
            raise UserError(f"run '{self.run_id}' is locked by PID {holder.get('pid', '?')} on "
                            f"{holder.get('host', '?')} since {holder.get('started', '?')}; stop that process or "
                            "wait for it to finish") from None
        previous = self._content()
        os.ftruncate(fd, 0)
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "started": self._clock()}
        os.pwrite(fd, json.dumps(holder).encode(), 0)
        os.fsync(fd)
        self._depth = 1
        if previous and self._on_takeover is not None:  # its holder died without releasing: record the takeover
            self._on_takeover(previous)
        try:
            yield
        finally:
            self._depth = 0
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def holder(self) -> dict | None:
        holder = self._content()
        if not holder or holder.get("host") != socket.gethostname():
            return holder
        return holder if pid_alive(int(holder.get("pid", 0))) else None

    def _content(self) -> dict | None:
        try:
            content = json.loads(self.path.read_text() or "null")
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        return content if isinstance(content, dict) else None
