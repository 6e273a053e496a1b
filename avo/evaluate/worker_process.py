"""One evaluation worker process, started (and set up for its task) before the candidate it will score arrives.

The process is `python -m avo.evaluate.worker` in a temp folder of its own (working directory, TMPDIR, result and
progress files), with a scrubbed environment, in its own session, dying with avo. It is told its set-up on stdin at
once and imports torch and Triton; a worker started while the previous candidate is still timed on its GPU (gated)
waits for `release()` before the part of the set-up that uses the device (the task, the reference's ops, the
toolchain warm-up), and gets with it what the evaluation before it learned (`known`); the token and the request
follow when a candidate is handed to it. It serves exactly one request: the candidate still runs in a process no
other candidate has touched. What it learned before any candidate
code ran (`known`, e.g. the reference's ops) comes back on a pipe it closes before reading its request.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import subprocess
import sys
import time
from pathlib import Path

from avo.util import procs


class WorkerProcess:
    def __init__(self, setup: dict, env: dict[str, str], gated: bool = False):
        """`gated`: it only imports until `release()` (another evaluation is using the GPU meanwhile)."""
        self._tmp = procs.temp_dir("eval")
        self.path = Path(self._tmp.name)
        self.result_path, self.progress_path = self.path / "result.json", self.path / "progress"
        self.progress_path.touch()
        workdir = self.path / "cwd"
        workdir.mkdir()
        (self.path / "tmp").mkdir()
        # A temp folder of this evaluation's own: nothing a candidate leaves there outlives it. (Bytecode of torch
        # and triton is written and reused as usual: without it each evaluation recompiled torch's Python modules.)
        env = dict(env)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(TMPDIR=str(self.path / "tmp"), TMP=str(self.path / "tmp"), TEMP=str(self.path / "tmp"))
        ready_read, ready_write = os.pipe()
        self._ready = os.fdopen(ready_read, "r")
        self._out, self._err = open(self.path / "stdout", "wb"), open(self.path / "stderr", "wb")
        try:
            self.proc = procs.popen([sys.executable, "-m", "avo.evaluate.worker", "--ready-fd", str(ready_write)],
                                    cwd=workdir, env=env, stdin=subprocess.PIPE, stdout=self._out,
                                    stderr=self._err, pass_fds=(ready_write,))
        finally:
            os.close(ready_write)
        self.token = secrets.token_hex(16)
        """A secret the worker reads before any candidate code runs and signs its result with: a result file written
        by anyone else (the temp folder is writable to the candidate) is refused."""
        self._report: str | None = None
        self._released = False
        self._send(dict(setup, result_path=str(self.result_path), progress_path=str(self.progress_path),
                        spawned_at=time.time()))
        if not gated:
            self.release()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def release(self, known: dict | None = None) -> None:
        """Let it go on with the set-up that uses the device (the task, the reference's ops, the warm-up), with
        `known` (what an earlier worker of the task reported, e.g. the reference's ops) added to its set-up."""
        if not self._released:
            self._released = True
            self._send({k: v for k, v in (known or {}).items() if v is not None})

    def start(self, request: dict) -> bool:
        """Hand the worker its candidates; False if it is gone (its stdin closed): the watch then sees it dead."""
        self.release()
        return self._send(self.token) and self._send(dict(request, requested_at=time.time()))

    def ready(self, timeout_s: float = 0.0) -> bool:
        """Whether the set-up is done (its report arrived on the pipe), waiting up to `timeout_s` for it."""
        if self._report is None:
            readable, _, _ = select.select([self._ready], [], [], timeout_s)
            if readable:
                self._report = self._ready.readline()
        return bool(self._report)

    def known(self) -> dict | None:
        """What the worker reported before any candidate code ran (None if nothing, e.g. it died first)."""
        if self._report is None and not self.alive():
            self.ready()
        try:
            return json.loads(self._report) if self._report and self._report.strip() else None
        except ValueError:
            return None

    def stderr_tail(self, limit: int) -> str:
        self._err.flush()
        return (self.path / "stderr").read_bytes()[-limit:].decode(errors="replace").strip()

    def discard(self) -> None:
        """Kill the process group and remove the temp folder."""
        procs.kill_group(self.proc)
        for handle in (self._ready, self._out, self._err, self.proc.stdin):
            try:
                handle.close()
            except (OSError, AttributeError):
                pass
        self._tmp.cleanup()

    def _send(self, payload) -> bool:
        line = payload if isinstance(payload, str) else json.dumps(payload)
        try:
            self.proc.stdin.write(f"{line}\n".encode())
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False
