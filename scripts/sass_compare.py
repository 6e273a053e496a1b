"""Whether two copies of a CUDA seed compile to the same machine code: every build the first copy's kernel.py
declares (its -D defines, as the wrapper would compile them) is compiled from both copies with nvcc for sm_90a and its
SASS compared instruction by instruction. A change meant to leave the shipped configurations alone (a new knob, off)
is shown to do so without a GPU:

    python3 scripts/sass_compare.py before kernels/gemm/cuda_wgmma

Needs nvcc, and cuobjdump (the copy Triton ships, else the one on PATH). Exit status 1 where any build differs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from avo.cuda import Build, declared_builds  # noqa: E402
from avo.evaluate.cuda_compile import find_nvcc, nvcc_command  # noqa: E402
from avo.evaluate.worker.loader import load_entry  # noqa: E402
from avo.profile.sass import run_tool, sass_text  # noqa: E402


def sass(nvcc: str, build: Build, work: Path) -> list[str]:
    """The build's instructions for sm_90a, compiled as avo's compile check compiles it, without line comments."""
    cubin = work / "k.cubin"
    run_tool(nvcc_command(nvcc, build, "sm_90a", cubin))
    return [line for line in sass_text(cubin).splitlines() if "/*" in line]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--entry", default="gemm", help="the kernel's entry function in kernel.py")
    args = parser.parse_args()
    first, second = args.first.resolve(), args.second.resolve()
    nvcc = find_nvcc()
    if nvcc is None:
        sys.exit("nvcc was not found on PATH or in $CUDA_HOME/bin")
    load_entry(first, args.entry)  # declares its builds in this process
    builds = declared_builds(first)
    differ = 0
    with tempfile.TemporaryDirectory() as work:
        for build in builds:
            twin = Build(second / build.source.relative_to(first), second, build.flags)
            same = sass(nvcc, build, Path(work)) == sass(nvcc, twin, Path(work))
            differ += not same
            print("same     " if same else "DIFFERENT", build.source.name,
                  " ".join(f for f in build.flags if f.startswith("-D")))
    print(f"{len(builds) - differ} of {len(builds)} builds the same")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
