"""The check suite judged outside the candidate's process: avo holds the references and compares the outputs.

A candidate runs in the same interpreter as the worker that calls it, so anything the worker holds while candidate
code runs, the candidate can read (frame locals, the garbage collector's objects) or change. The check suite's
references are therefore never in that process: the worker forks, before it touches the GPU or loads any candidate,
a producer (worker/references.py) that draws each check case's inputs as the check stage will, computes the exact
reference and writes it here on a pipe only the producer can write; the worker keeps no copy of that pipe. For each
candidate the worker then sends its check outputs (frames.py) and waits for the verdict, which is computed here, on
the CPU, with the same checks as everywhere (correctness.verify_values), and sent back so that the bench stage runs
only candidates that passed.

What the worker reports afterwards cannot undo a verdict from here: `apply` makes a result `correct` only where
every check case was judged correct here, takes the rows' errors from here, and rejects every result of a worker whose
check channel carried anything but well-formed frames for the cases it was sent.
"""

from __future__ import annotations

import json
import math
import os
import queue
import threading
from avo.evaluate import frames
from avo.evaluate.worker.judging import RefCase, compare, ref_case

MAX_REFERENCE = 1 << 38
REFS_WAIT_S = 600.0
"""How long the outputs' reader waits for the references (they are complete before any candidate code runs)."""


ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1, "int16": 2, "int32": 4,
            "int64": 8, "bool": 1}


def _out_bytes(header: dict) -> int:
    """The size of the output a reference's header promises (no torch in the reader threads: Judge.refs)."""
    try:
        return math.prod(int(n) for n in header["out_shape"]) * ITEMSIZE.get(header["out_dtype"], 8)
    except (KeyError, TypeError, ValueError):
        return 0


def warm() -> None:
    """What judging imports in avo's process (torch, the comparisons), imported while a worker starts up rather than
    while it waits for its first verdict: about a second on a CPU machine, once per avo process."""
    import torch  # noqa: F401

    from avo.evaluate.worker import correctness  # noqa: F401


class Judge:
    """avo's end of one worker's two check pipes: `child_fds` go to the worker; `answers` are the verdict lines to
    send it; `apply` is the last word on its results."""

    def __init__(self) -> None:
        refs_read, self._refs_write = os.pipe()
        checks_read, self._checks_write = os.pipe()
        self._raw_refs: list[tuple[dict, bytes]] = []
        self._refs: list[RefCase] | None = None
        self.refs_error: str | None = None
        self.forged: str | None = None
        self.verdicts: dict[int, list[dict]] = {}
        self._refs_done = threading.Event()
        self._outputs: dict[int, dict[int, tuple[dict, bytes]]] = {}
        self._finished: queue.Queue[int] = queue.Queue()
        for target, fd in ((self._read_refs, refs_read), (self._read_checks, checks_read)):
            threading.Thread(target=target, args=(fd,), daemon=True).start()

    @property
    def child_fds(self) -> tuple[int, int]:
        """(references pipe, check outputs pipe): the write ends, for the worker's command line."""
        return self._refs_write, self._checks_write

    @property
    def refs(self) -> list[RefCase]:
        """The references as tensors, made on first use by the caller's thread: the readers run no torch code, so a
        reader still blocked when avo exits holds no C++ frame that the interpreter's shutdown would abort."""
        if self._refs is None:
            self._refs = [ref_case(*raw) for raw in self._raw_refs]
        return self._refs

    def started(self) -> None:
        """The worker holds its copies now: avo's are closed, so each reader sees the end when the worker does."""
        for fd in self.child_fds:
            os.close(fd)

    def _read_refs(self, fd: int) -> None:
        try:
            with os.fdopen(fd, "rb") as stream:
                while True:
                    frame = frames.read(stream, MAX_REFERENCE)
                    if frame is None:
                        self.refs_error = "the check suite's references were cut short (their process ended early)"
                        return
                    header, payload = frame
                    if header.get("end"):
                        if header.get("cases") != len(self._raw_refs):
                            self.refs_error = "the check suite's references are incomplete"
                        return  # nothing after the end is read: the pipe is closed here
                    self._raw_refs.append((header, payload))
        except (frames.Malformed, KeyError, TypeError, ValueError) as exc:
            self.refs_error = f"the check suite's references could not be read ({exc})"
        finally:
            self._refs_done.set()

    def _read_checks(self, fd: int) -> None:
        with os.fdopen(fd, "rb") as stream:
            if not self._refs_done.wait(REFS_WAIT_S):
                return
            limit = max((_out_bytes(header) for header, _ in self._raw_refs), default=0)
            try:
                while (frame := frames.read(stream, limit)) is not None:
                    self._take(*frame)
            except frames.Malformed as exc:
                self.forged = f"its check outputs' channel carried something else than the evaluator's frames ({exc})"

    def _take(self, header: dict, payload: bytes) -> None:
        cand, index = header.get("cand"), header.get("case_index")
        if not isinstance(cand, int) or cand in self.verdicts or not 0 <= cand < 1024:
            raise frames.Malformed("a frame for no candidate, or for one already judged")
        if header.get("done"):
            self.verdicts[cand] = []
            self._finished.put(cand)
            return
        seen = self._outputs.setdefault(cand, {})
        if not isinstance(index, int) or not 0 <= index < len(self._raw_refs) or index in seen:
            raise frames.Malformed(f"an output for case {index!r}, which is not a check case or came twice")
        seen[index] = (header, payload)

    def pending(self) -> bool:
        """Whether some candidate's outputs are all in and its verdict not yet taken (`answers`)."""
        return not self._finished.empty()

    def answers(self) -> list[str]:
        """The verdict line for each candidate whose outputs are all in, judged now."""
        lines = []
        while not self._finished.empty():
            cand = self._finished.get()
            if self.refs_error:
                lines.append(json.dumps({"verdict": cand, "error": self.refs_error}))
                continue
            outputs = self._outputs.pop(cand, {})
            self.verdicts[cand] = [compare(self.refs[i], *outputs[i]) for i in sorted(outputs)]
            lines.append(json.dumps({"verdict": cand, "cases": self.verdicts[cand]}))
        return lines

    def apply(self, results: list, check_suite: str) -> None:
        """The check suite's verdicts from here over what the worker reported (which can only make a result
        worse): a `correct` result needs every check case judged correct here."""
        for i, r in enumerate(results):
            if self.forged:
                r.status, r.rule, r.fitness, r.message = "rejected", "runtime.file_access", 0.0, self.forged
                continue
            if r.status != "correct":
                continue
            verdicts = self.verdicts.get(i) or []
            rows = [c for c in r.cases if c.suite == check_suite][:len(self.refs)]
            if len(verdicts) != len(self.refs) or len(rows) != len(self.refs):
                r.status, r.rule, r.fitness = "rejected", "runtime.check_channel", 0.0
                r.message = (f"{len(verdicts)} of its {len(self.refs)} check-suite outputs reached the evaluator "
                             "that compares them")
                continue
            for row, verdict in zip(rows, verdicts):
                row.correct, row.rel_err = verdict["correct"], verdict["rel_err"]
                row.library_rel_err, row.message = verdict["library_rel_err"], verdict["message"] or ""
            failed = [v for v in verdicts if not v["correct"]]
            if failed:
                r.status, r.rule, r.fitness, r.message = "incorrect", failed[0]["rule"], 0.0, failed[0]["message"]
