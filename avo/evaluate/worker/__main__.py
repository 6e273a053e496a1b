"""The child side of an evaluation: `python -m avo.evaluate.worker [--ready-fd N]`, told what to do on stdin.

Runs in its own process group with a scrubbed environment (see harness.py and worker_process.py). First the set-up
that needs no candidate (evaluation.prepare), which a worker started ahead of its request does while it waits; then
the request's candidates (evaluation.evaluate). The verdict goes on the result channel, a pipe the parent passed in
(`--result-fd`; candidate code may print to stdout): `ready`, then, signed with the token the parent sends on stdin
only in answer to it, the results; then the process exits at once, so threads a candidate left behind cannot hold
it open.
"""

from __future__ import annotations

import json
import os
import sys
import time

from avo.evaluate.worker import evaluation
from avo.evaluate.worker.candidate import Progress


def _no_core_dumps() -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):
        pass


def main(argv: list[str] | None = None) -> None:
    """Standard input carries four lines from the parent: the set-up (task, device, config, progress file); a
    `go` object (what earlier workers of the task learned, e.g. the reference's ops), once the device is free for
    the set-up's own work (until then only modules are imported, which touches no
    GPU, so a worker can start while another candidate is timed on its GPU); then, when a candidate is to be
    scored, the request (mode, candidates); last, in answer to `ready`, the token that signs the result.
    `--ready-fd N` names a pipe that gets what later workers may reuse (`Prepared.known`) and is closed before any
    candidate code runs; `--result-fd N` the result channel; `--refs-fd N` and `--check-fd N` the check suite's
    pipes to avo's judge (the references, written by a forked producer, and the outputs; avo/evaluate/judge.py),
    with the judge's verdicts coming on stdin, between the request and the token."""
    argv = sys.argv[1:] if argv is None else argv
    ready_fd = int(argv[argv.index("--ready-fd") + 1]) if "--ready-fd" in argv else None
    result_fd = int(argv[argv.index("--result-fd") + 1])
    judge_fds = [int(argv[argv.index(flag) + 1]) for flag in ("--refs-fd", "--check-fd") if flag in argv]
    for fd in (result_fd, *judge_fds):
        os.set_inheritable(fd, False)  # no program the candidate starts holds it
    setup = json.loads(sys.stdin.readline())
    if len(judge_fds) == 2:
        setup["refs_fd"], setup["check_fd"] = judge_fds
    _no_core_dumps()
    evaluation._import_toolchain()
    setup["startup_s"] = time.time() - float(setup.get("spawned_at") or time.time())
    go = sys.stdin.readline().strip()  # a JSON object: what earlier workers learned (empty: let go unused)
    if not go:
        os._exit(0)
    setup.update(json.loads(go))
    progress = Progress(open(setup["progress_path"], "a"))
    prepared = evaluation.prepare(setup, progress)
    if ready_fd is not None:
        with os.fdopen(ready_fd, "w") as ready:
            ready.write(json.dumps(prepared.known()) + "\n")
    request = json.loads(sys.stdin.readline() or "{}")
    if not request.get("candidates"):  # the parent let this worker go unused
        os._exit(0)
    results = evaluation.evaluate(prepared, request)
    results_json = ", ".join(r.model_dump_json() for r in results)
    os.write(result_fd, b"ready\n")
    token = sys.stdin.readline().strip()  # sent only now: it existed nowhere in this process while candidates ran
    message = f'{{"token": {json.dumps(token)}, "results": [{results_json}]}}\n'.encode()
    while message:
        message = message[os.write(result_fd, message):]
    progress.mark("done")
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(0)


if __name__ == "__main__":
    main()
