"""Run by test_evaluation_setup.py in a process of its own: a worker's set-up with the references' producer forked
as in a real worker (a pipe that a thread drains, as avo's judge does), and the producer changed by `mode`:

  beside  the producer waits (up to a minute) until the worker has gone on to record the library's ops
  fails   the producer raises
"""

from __future__ import annotations

import io
import os
import select
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from avo.config import EvalConfig  # noqa: E402
from avo.evaluate.worker import evaluation, references  # noqa: E402
from avo.evaluate.worker.candidate import Progress  # noqa: E402


def drained(fd: int) -> tuple[threading.Thread, bytearray]:
    data = bytearray()

    def drain():
        while chunk := os.read(fd, 1 << 16):
            data.extend(chunk)
        os.close(fd)

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    return thread, data


def main(mode: str) -> None:
    computed, recorded = references.references, evaluation._forbidden
    go_r, go_w = os.pipe()

    def after_the_ops(ctx):
        if not select.select([go_r], [], [], 60)[0]:
            raise RuntimeError("the worker waited for its references before going on with its set-up")
        yield from computed(ctx)

    def broken(ctx):
        raise ValueError("no reference here")
        yield

    def forbidden(ctx, known=None):
        os.write(go_w, b"g")
        return recorded(ctx, known)

    references.references = after_the_ops if mode == "beside" else broken
    evaluation._forbidden = forbidden
    refs_r, refs_w = os.pipe()
    reader, data = drained(refs_r)
    setup = {"task": "gemm", "device": "interpret", "gpu": "h200", "check_suite": "tiny", "bench_suite": "",
             "seed": 5, "config": EvalConfig().model_dump(mode="json"), "refs_fd": refs_w,
             "check_fd": os.open(os.devnull, os.O_WRONLY)}
    try:
        evaluation.prepare(setup, Progress(io.StringIO()))
    except RuntimeError as exc:
        print(f"set-up failed: {exc}")
        return
    reader.join(60)
    if not reader.is_alive() and b'"end": true' in bytes(data):
        print("every reference written, the producer gone")


if __name__ == "__main__":
    main(sys.argv[1])
