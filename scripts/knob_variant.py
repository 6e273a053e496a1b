"""Copy a candidate folder with some `# avo: tune` knobs set to other values, for side-by-side benches.

    python scripts/knob_variant.py kernels/attention/triton_naive /tmp/v/exp2 EXP2=True NUM_STAGES=3

Values are Python literals (64, True, 'x'); every knob named must exist. Prints the new folder.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from avo.agent.heuristic.knobs import parse_literal, render


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        sys.exit(__doc__)
    src, dest, settings = Path(argv[0]), Path(argv[1]), argv[2:]
    point = {}
    for setting in settings:
        name, sep, value = setting.partition("=")
        if not sep:
            sys.exit(f"not NAME=VALUE: {setting}")
        point[name] = parse_literal(value)
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"))
    kernel = dest / "kernel.py"
    kernel.write_text(render(kernel.read_text(), point))
    print(dest)


if __name__ == "__main__":
    main(sys.argv[1:])
