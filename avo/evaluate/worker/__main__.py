"""The child side of an evaluation: `python -m avo.evaluate.worker REQUEST.json`.

Runs in its own process group with a scrubbed environment (see harness.py). The request names the task, the
candidates and the suites (evaluation.py runs them). The verdict is written to a result file opened before any
candidate code runs (candidate code may print to stdout), signed with the token the parent wrote to stdin; then the
process exits at once, so threads a candidate left behind cannot hold it open.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from avo.evaluate.worker import evaluation
from avo.evaluate.worker.candidate import Progress


def _no_core_dumps() -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):
        pass


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    token = sys.stdin.readline().strip()  # from the parent, before any candidate code exists in this process
    sys.stdin.close()
    request_path = Path(argv[0])
    request = json.loads(request_path.read_text())
    request_path.unlink(missing_ok=True)
    _no_core_dumps()
    result_file = open(request["result_path"], "w")
    progress = Progress(open(request["progress_path"], "a"))
    results = evaluation.run(request, progress)
    results_json = ", ".join(r.model_dump_json() for r in results)
    result_file.write(f'{{"token": {json.dumps(token)}, "results": [{results_json}]}}')
    result_file.flush()
    os.fsync(result_file.fileno())
    progress.mark("done")
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(0)


if __name__ == "__main__":
    main()
