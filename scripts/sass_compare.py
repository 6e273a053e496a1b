"""Whether two copies of a CUDA seed compile to the same machine code: every build the first copy's kernel.py
declares (its -D defines, as the wrapper would compile them) is compiled from both copies with nvcc for sm_90a and its
SASS compared instruction by instruction. A change meant to leave the shipped configurations alone (a new knob, off)
is shown to do so without a GPU:

    python3 scripts/sass_compare.py before kernels/gemm/cuda_wgmma

Needs nvcc and cuobjdump (on PATH, or the copy Triton ships). Exit status 1 where any build differs.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from avo.cuda import declared_builds  # noqa: E402
from avo.evaluate.worker.loader import load_entry  # noqa: E402


def cuobjdump() -> str:
    found = shutil.which("cuobjdump")
    if found:
        return found
    import triton

    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")


def defines(folder: Path, entry: str) -> list[tuple[str, tuple[str, ...]]]:
    load_entry(folder, entry)
    return [(b.source.name, tuple(f for f in b.flags if f.startswith("-D"))) for b in declared_builds(folder)]


def sass(folder: Path, source: str, flags: tuple[str, ...], work: Path) -> list[str]:
    cubin = work / "k.cubin"
    subprocess.run(["nvcc", "-cubin", "-arch=sm_90a", "-O3", "-std=c++17", *flags, "-I", str(folder), "-o",
                    str(cubin), str(folder / source)], check=True)
    text = subprocess.run([cuobjdump(), "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    return [line for line in text.splitlines() if "/*" in line]  # instructions, without the file's own name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--entry", default="gemm", help="the kernel's entry function in kernel.py")
    args = parser.parse_args()
    builds = defines(args.first.resolve(), args.entry)
    differ = 0
    with tempfile.TemporaryDirectory() as work:
        for source, flags in builds:
            same = sass(args.first.resolve(), source, flags, Path(work)) == \
                sass(args.second.resolve(), source, flags, Path(work))
            differ += not same
            print("same     " if same else "DIFFERENT", source, " ".join(flags))
    print(f"{len(builds) - differ} of {len(builds)} builds the same")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
