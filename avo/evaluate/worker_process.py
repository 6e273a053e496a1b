"""One evaluation worker process, started (and set up for its task) before the candidate it will score arrives.

The process is `python -m avo.evaluate.worker` with a scrubbed environment, in its own session, dying with avo, and,
where `wrap` is given, inside the OS sandbox (avo.evaluate.sandbox), where it can write to its own box only: a temp
folder holding its working directory, TMPDIR, progress file, private Triton/CuPy/Inductor caches, and `cand/`,
into which the candidates are copied when they are handed to it (the worker starts before they are known, and no
candidate ever writes to the folder the lineage commits). It is told its set-up on stdin at once and imports torch
and Triton; a worker started while the previous candidate is still timed on its GPU (gated) waits for `release()`
before the part of the set-up that uses the device (the task, the reference's ops, the toolchain warm-up), and gets
with it what the evaluation before it learned (`known`); the request follows when a candidate is handed to it. It
serves exactly one request: the candidate still runs in a process no other candidate has touched. What it learned
before any candidate code ran (`known`, e.g. the reference's ops) comes back on a pipe it closes before reading its
request. Once an earlier worker has reported it, two are kept ahead (Evaluator._spawn): the one after the next is let
go when an evaluation ends and may still be setting up while the next one compiles and checks; that one's check
verdicts (which its timing waits for) are then held until the set-up is done (`hold`), so the two never share the
GPU while anything is timed. (A candidate that patched its worker not to wait would be timed beside that set-up,
the library too, call by call: noise, no edge.) A sandboxed worker's caches start as a copy of what a set-up-only
worker built (trusted_cache.py).

The verdict comes back on a pipe of its own (the result channel), never through a file: once the candidates are
scored the worker writes `ready`, the parent answers with a token on stdin that did not exist anywhere in the
process while candidate code ran, and the worker writes its results signed with it. Anything else on the channel
(a message before `ready`, more than one result) is a forgery (`channel_results`). The check suite's references and
outputs travel on two more pipes, to the judge (avo/evaluate/judge.py), whose verdicts go back on stdin.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from avo.evaluate import trusted_cache
from avo.evaluate.judge import Judge, warm as warm_judging
from avo.util import procs

READY = b"ready"
CACHES = {"TRITON_CACHE_DIR": "triton", "CUPY_CACHE_DIR": "cupy", "TORCHINDUCTOR_CACHE_DIR": "inductor",
          "CUDA_CACHE_PATH": "cuda"}
"""A sandboxed worker's compile caches, private to its box: a kernel binary one candidate planted in a shared cache
would otherwise run as another candidate's. Each starts as its own copy of the trusted builds (trusted_cache.py);
nothing a candidate compiles is reused. `CUDA_CACHE_PATH` is the driver's JIT cache: the library's kernels the driver
compiles from PTX in the set-up (cuDNN's attention kernels, per shape: 3.0 s of first calls on the attention bench
suite with it empty, 1.3-1.8 s with it holding them, on the H200) are compiled once, by the set-up-only worker."""

SANDBOX_CWD = "/tmp/avo-work"
"""Where a sandboxed worker's working folder appears inside its sandbox: the same path in every worker. cuDNN's
runtime-compiled attention kernels carry the working directory in their PTX, so the driver's JIT cache would hold
nothing for a worker started in another folder (on the H200: 18 of the 19 kernels of the set-up compiled again,
2.2-3.3 s of its library calls)."""


class WorkerProcess:
    def __init__(self, setup: dict, env: dict[str, str], gated: bool = False,
                 wrap: Callable[..., list[str]] | None = None, seeded: bool = True):
        """`gated`: it only imports until `release()` (another evaluation is using the GPU meanwhile). `wrap`: the
        sandbox (`wrap(cmd, writable=..., cwd=..., cwd_as=SANDBOX_CWD)` gives the command line that runs `cmd` in
        it), None for none.
        `seeded`: a sandboxed worker's caches start with the trusted builds (made first where there are none)."""
        self._tmp = procs.temp_dir("eval")
        self.path = Path(self._tmp.name)
        self.progress_path = self.path / "progress"
        self.progress_path.touch()
        workdir = self.path / "cwd"
        for folder in ("cwd", "tmp", "cand"):
            (self.path / folder).mkdir()
        # A temp folder of this evaluation's own: nothing a candidate leaves there outlives it. (Bytecode of torch
        # and triton is written and reused as usual: without it each evaluation recompiled torch's Python modules.)
        env = dict(env)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(TMPDIR=str(self.path / "tmp"), TMP=str(self.path / "tmp"), TEMP=str(self.path / "tmp"))
        if wrap is not None:
            trusted = _trusted_caches(setup, env, wrap, build=not gated) if seeded else None
            if trusted is not None:
                trusted_cache.seed(trusted, self.path / "cache")
            env.update({name: str(self.path / "cache" / sub) for name, sub in CACHES.items()})
        ready_read, ready_write = os.pipe()
        result_read, result_write = os.pipe()
        self.judge = Judge()
        refs_write, check_write = self.judge.child_fds
        self._ready = os.fdopen(ready_read, "r")
        self._result_fd, self._channel, self._token_sent, self._closed = result_read, bytearray(), False, False
        os.set_blocking(result_read, False)
        self._out, self._err = open(self.path / "stdout", "wb"), open(self.path / "stderr", "wb")
        cmd = [sys.executable, "-m", "avo.evaluate.worker", "--ready-fd", str(ready_write),
               "--result-fd", str(result_write), "--refs-fd", str(refs_write), "--check-fd", str(check_write)]
        if wrap is not None:
            cmd = wrap(cmd, writable=[self.path], cwd=workdir, cwd_as=SANDBOX_CWD)
        try:
            self.proc = procs.popen(cmd, cwd=workdir, env=env, stdin=subprocess.PIPE, stdout=self._out,
                                    stderr=self._err, pass_fds=(ready_write, result_write, refs_write, check_write))
        finally:
            os.close(ready_write)
            os.close(result_write)
            self.judge.started()
        self.token = secrets.token_hex(16)
        """Sent only once the worker says `ready` on the result channel, after every candidate's code has run."""
        self._report: str | None = None
        self.hold: Callable[[], bool] | None = None
        """While it returns true the judge's verdicts on the check suite wait here. The worker times nothing
        before they arrive, so a worker still setting up on the same GPU while this one compiles and checks
        (Evaluator._spawn) is done before this one's timing starts."""
        self.holding = False
        """Whether the last `poll_channel` held a verdict back (that wait is not the candidate's time)."""
        self._released = False
        self._send(dict(setup, progress_path=str(self.progress_path), spawned_at=time.time()))
        warm_judging()  # while the worker imports its own
        if not gated:
            self.release()

    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def released(self) -> bool:
        """Whether it was let go on with its set-up (`release`)."""
        return self._released

    def release(self, known: dict | None = None) -> None:
        """Let it go on with the set-up that uses the device (the task, the reference's ops, the warm-up), with
        `known` (what an earlier worker of the task reported, e.g. the reference's ops) added to its set-up."""
        if not self._released:
            self._released = True
            self._send({k: v for k, v in (known or {}).items() if v is not None})

    def start(self, request: dict) -> bool:
        """Hand the worker its candidates (copied into its box first, so the request names only the copies); False
        if it is gone (its stdin closed): the watch then sees it dead. `requested_at` (default now): when the
        caller asked, so the worker's `waited` counts the set-up the caller waited for before the hand-over too."""
        self.release()
        copies = []
        for i, folder in enumerate(request["candidates"]):
            copy = self.path / "cand" / str(i)
            copy_candidate(Path(folder), copy)
            copies.append(str(copy))
        return self._send(dict(request, candidates=copies, requested_at=request.get("requested_at") or time.time()))

    def poll_channel(self, timeout_s: float = 0.0) -> None:
        """Read what the worker wrote on its result channel (waiting up to `timeout_s` for something); on its first
        line, if that is `ready`, send it the token. First, the judge's verdict on each candidate whose check outputs
        are all in."""
        self.holding = self.hold is not None and self.judge.pending() and self.hold()
        if not self.holding:
            for line in self.judge.answers():
                self._send(line)
        if self._result_fd < 0 or self._closed:  # nothing more can come: only wait (no select spinning on EOF)
            time.sleep(timeout_s)
            return
        readable, _, _ = select.select([self._result_fd], [], [], timeout_s)
        while readable:
            try:
                chunk = os.read(self._result_fd, 1 << 16)
            except (BlockingIOError, OSError):
                break
            if not chunk:
                self._closed = True
                break
            self._channel += chunk
        if not self._token_sent and b"\n" in self._channel:
            self._token_sent = True
            if self._channel.split(b"\n", 1)[0] == READY:
                self._send(self.token)

    def channel_results(self) -> list[dict] | str | None:
        """The results the worker sent (read once the process is gone), `None` if it sent none (it died), or why
        what came is a forgery: a first message other than `ready`, more than one result, a wrong token."""
        if not self._closed:
            self.poll_channel()
        messages = [line for line in bytes(self._channel).split(b"\n") if line.strip()]
        if not messages:
            return None
        if messages[0] != READY:
            return "something other than the evaluator wrote on its result channel before it was done"
        if len(messages) == 1:
            return None
        if len(messages) > 2:
            return f"the result channel carried {len(messages) - 1} results where the evaluator writes one"
        try:
            payload = json.loads(messages[1])
            token, results = payload.get("token"), payload["results"]
        except (ValueError, KeyError, TypeError, AttributeError):
            return None  # torn: the worker died writing it
        if token != self.token or not isinstance(results, list):
            return "the result was not signed with the token the evaluator gave the worker"
        return results

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
        if self._result_fd >= 0:
            os.close(self._result_fd)
            self._result_fd = -1
        self._tmp.cleanup()

    def _send(self, payload) -> bool:
        line = payload if isinstance(payload, str) else json.dumps(payload)
        try:
            self.proc.stdin.write(f"{line}\n".encode())
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False


def _trusted_caches(setup: dict, env: dict[str, str], wrap: Callable[..., list[str]], build: bool) -> Path | None:
    """The trusted copy of the set-up's builds, made now by a set-up-only worker where there is none and `build`
    (a gated worker never builds: the set-up would use the GPU another evaluation is timed on)."""
    digest = trusted_cache.key(setup, env)
    if not build:
        return trusted_cache.existing(digest)
    limit = float(setup.get("config", {}).get("import_timeout_s", 180.0))
    return trusted_cache.ensure(digest, functools.partial(_build_trusted, setup, env, wrap, limit))


def _build_trusted(setup: dict, env: dict[str, str], wrap: Callable[..., list[str]], limit: float,
                   dest: Path) -> bool:
    """Set a worker up that is never sent a request (no candidate code ever runs in it), kill it once it reports
    ready, and take what its set-up left in its caches."""
    builder = WorkerProcess(setup, env, wrap=wrap, seeded=False)
    try:
        if not builder.ready(limit):
            return False
        procs.kill_group(builder.proc)  # nothing writes its caches while they are copied
        return trusted_cache.take(builder.path / "cache", dest)
    finally:
        builder.discard()


def copy_candidate(source: Path, target: Path) -> None:
    """The candidate's folders and regular files (no links, devices or FIFOs, no bytecode): what the worker reads."""
    target.mkdir(parents=True)
    for entry in os.scandir(source):
        if entry.name == "__pycache__":
            continue
        if entry.is_dir(follow_symlinks=False):
            copy_candidate(Path(entry.path), target / entry.name)
        elif entry.is_file(follow_symlinks=False):
            shutil.copyfile(entry.path, target / entry.name, follow_symlinks=False)
