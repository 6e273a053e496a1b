"""The builds a CUDA C++ candidate's kernel.py declares (each load_module call: a source and its -D defines and
options), read in a child process that imports kernel.py, as an evaluation does. `avo inspect` runs this child inside
the evaluations' OS sandbox (confine.py: the import runs the candidate's code) and compiles exactly those builds, so
a kernel.py that builds one source under several configurations (a per-shape plan table) is inspected as each of
them runs, not as the source compiles with no defines.

    python -m avo.profile.cuda_builds --candidate DIR --kernel attention --out builds.json
    -> {"ok": true, "builds": [{"source": "attention.cu", "flags": ["-DBLOCK_N=128", ...]}, ...]}
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def declared(candidate: Path, task_spec: str) -> list[dict]:
    """Each build kernel.py declared on import: its source relative to the candidate's folder, and its flags."""
    from avo.cuda import declared_builds
    from avo.evaluate.worker.loader import load_entry
    from avo.tasks import load

    candidate = Path(candidate).resolve()
    load_entry(candidate, load(task_spec).entry)
    return [{"source": build.source.relative_to(candidate).as_posix(), "flags": list(build.flags)}
            for build in declared_builds(candidate)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m avo.profile.cuda_builds")
    parser.add_argument("--candidate", type=Path, required=True)
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        result = {"ok": True, "builds": declared(args.candidate, args.kernel)}
    except Exception as exc:  # the candidate's import failed: the report says so, the caller decides
        result = {"ok": False, "error": getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"}
    args.out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
