"""The worker's side of the check suite's judging (avo/evaluate/judge.py says why it is judged outside).

`produce_apart` forks a producer before the worker touches the GPU (the worker's set-up goes on beside it): it
draws each check case's inputs exactly as the check stage will (check.check_inputs), computes the task's exact
reference and, for float32 cases, the library's own error against it (precision parity), writes them as frames on
the references pipe and exits; the worker closes its copy of that pipe unread. No reference tensor ever exists in
the worker, on the host or the GPU.

Then, per candidate, `ChannelJudge` sends each check output to avo and, once the candidate's check suite is done,
waits on stdin for the verdict. `LocalJudge` does the same in-process, for scripts that run an evaluation without
avo's parent process (scripts/profile_eval.py): no boundary there, and nothing that scores a run uses it.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any, Callable

from avo.evaluate import frames


def references(ctx: Any):
    """(header, reference tensor) per check case, as the producer writes them."""
    from avo.evaluate.worker.check import check_inputs, check_label
    from avo.evaluate.worker.precision import library_error

    task = ctx.task
    for i, case in enumerate(task.cases(ctx.check_suite)):
        inputs = check_inputs(ctx, i, case)
        ref = task.reference(*inputs)
        shape, dtype = task.output_like(case, inputs)
        header = {"index": i, "case": case.name, "label": check_label(i, case), "tolerance": task.tolerance(case.dtype),
                  "out_shape": [int(n) for n in shape], "out_dtype": dtype, "shape": list(ref.shape),
                  "dtype": str(ref.dtype).removeprefix("torch.")}
        if case.dtype == "float32":  # what fp32 gives here (worker/precision.py)
            header["library_rel_err"] = library_error(task, inputs, ref)
        yield header, ref
        del inputs, ref


def produce_apart(ctx: Any, fd: int) -> Callable[[], None]:
    """The references written on `fd` by a forked child; the worker keeps no copy of `fd` and goes on with its set-up
    meanwhile (avo reads the pipe as it fills). Returns what waits for the child, which the set-up calls before it
    is done, so the child has exited before any candidate code runs. A child that fails leaves the references cut
    short, which avo reports as the evaluation's crash, and its wait raises."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            count = 0
            for header, ref in references(ctx):
                frames.write(fd, header, frames.tensor_bytes(ref))
                count += 1
            frames.write(fd, {"end": True, "cases": count})
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stderr.flush()
            os._exit(code)
    os.close(fd)
    _restart_blas_threads()

    def done() -> None:
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise RuntimeError(f"the check suite's references could not be computed (their process ended with "
                               f"status {status}; its traceback is above)")

    return done


def _restart_blas_threads() -> None:
    """OpenBLAS (NumPy's) stops its threads before a fork and starts them again at its next product: that product
    is made here, so the threads do not start while a candidate runs (the Sentinel would take them for its own; the
    Triton interpreter's dots are NumPy's)."""
    import numpy

    square = numpy.ones((512, 512), dtype=numpy.float32)
    square @ square


class ChannelJudge:
    """Outputs to avo on `fd`; verdicts from avo on `stdin`."""

    def __init__(self, fd: int, stdin: Any):
        self.fd, self.stdin = fd, stdin

    def submit(self, cand: int, index: int, out: Any) -> None:
        header = {"cand": cand, "case_index": index, "shape": list(out.shape),
                  "dtype": str(out.dtype).removeprefix("torch.")}
        frames.write(self.fd, header, frames.tensor_bytes(out))

    def verdicts(self, cand: int) -> dict:
        frames.write(self.fd, {"cand": cand, "done": True})
        line = self.stdin.readline()
        try:
            answer = json.loads(line)
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or answer.get("verdict") != cand:
            return {"error": "the evaluator's verdict on the check suite did not arrive"}
        return answer


class LocalJudge:
    """The same verdicts computed in this process (no parent to judge): for profiling scripts only."""

    def __init__(self, ctx: Any):
        from avo.evaluate.worker.judging import ref_from

        self.refs = [ref_from(header, ref.cpu()) for header, ref in references(ctx)]
        self.outputs: dict[int, dict[int, tuple[dict, bytes]]] = {}

    def submit(self, cand: int, index: int, out: Any) -> None:
        header = {"shape": list(out.shape), "dtype": str(out.dtype).removeprefix("torch.")}
        self.outputs.setdefault(cand, {})[index] = (header, bytes(frames.tensor_bytes(out)))

    def verdicts(self, cand: int) -> dict:
        from avo.evaluate.worker.judging import compare

        outputs = self.outputs.pop(cand, {})
        return {"verdict": cand, "cases": [compare(self.refs[i], *outputs[i]) for i in sorted(outputs)]}
