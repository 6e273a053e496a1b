"""The other paths that run a candidate's code, `avo profile` (ncu and its driver), `avo inspect`'s compile capture
(Triton) and its reading of a CUDA C++ candidate's declared builds (inspect-cuda), against the sandbox's attacks: a
candidate that, as it is imported, writes outside its folder (attack writes_outside), leaves a `setsid` loop behind
(outlives) and reads the API key from the environment of every process up its chain of parents and in sight
(reads_ancestors). Sandboxed, none gets through; with the sandbox off, all do, so these tests can tell. ncu is a
stand-in that runs the program after its options, as ncu does (no GPU here)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import needs
from test_attacks import ATTACKS, CANARY, HONEST, Setting, as_avo, gone, tagged

pytestmark = needs.bwrap
PATHS = ("profile", "inspect", "inspect-cuda")
RUN = """
import json, sys
from pathlib import Path
from avo.gpus import PROFILES
from avo.profile import ProfileError
from avo.profile.compiler import inspect_candidate
from avo.profile.ncu import profile_candidate
path, folder, ncu, runs, sandbox = json.loads(sys.argv[1])
kwargs = dict(gpu=PROFILES["h200"], sandbox=sandbox, hide=(Path(runs),), timeout_s=300)
try:
    if path == "profile":
        profile_candidate(Path(folder), "gemm", ncu=ncu, **kwargs)
        print(json.dumps("no error"))
    else:  # a CUDA candidate's .cu files still compile when its kernel.py fails: the report's notes say why
        print(json.dumps(" ".join(inspect_candidate(Path(folder), "gemm", **kwargs).data["problems"]) or "no error"))
except ProfileError as exc:
    print(json.dumps(str(exc)))
"""
PASS_THROUGH_NCU = """\
import subprocess, sys
args = sys.argv[1:]
start = 0
while args[start].startswith("--"):  # every option takes a value but these two
    start += 1 if args[start] in ("--nvtx", "--csv") else 2
done = subprocess.run(args[start:])
with open(args[args.index("--log-file") + 1], "w") as log:
    log.write("==PROF== Disconnected from process 1\\n")
sys.exit(done.returncode)
"""


def pass_through_ncu(root: Path) -> str:
    """In a folder of its own: the sandbox binds a program's folder, and the test's root holds the runs folder."""
    script = root / "bin" / "ncu"
    script.parent.mkdir()
    script.write_text(f"#!{sys.executable}\n" + PASS_THROUGH_NCU)
    script.chmod(0o755)
    return str(script)


CUDA_HONEST = """
def gemm(a, b):  # what runs is beside the point: avo inspect only imports this to read its CUDA builds
    return a @ b
"""


def attacking_candidate(setting: Setting, cuda: bool = False) -> Path:
    """An honest GEMM whose import writes outside, starts the loop and reads the environments, then raises what it
    read; in the run's workspace, under the runs folder the sandbox masks, as the agent's working copy is. `cuda`: a
    CUDA C++ candidate instead (a .cu file beside a kernel.py that never names Triton)."""
    fills = {"TMP_FILE": setting.tmp_file, "HOME": setting.home, "LINEAGE": setting.lineage, "NOTES": setting.notes,
             "TAG": setting.tag, "MARKER": setting.marker}
    parts = []
    for attack in ("writes_outside", "outlives", "reads_ancestors"):
        source = (ATTACKS / f"{attack}.py").read_text()
        for name, value in fills.items():
            source = source.replace(f"@{name}@", str(value))
        parts.append(source)
    parts.insert(1, "_scribble()\n")  # writes_outside's writes, at import rather than when an output is freed
    folder = setting.runs / "r1" / "workspace"
    folder.mkdir()
    (folder / "kernel.py").write_text((CUDA_HONEST if cuda else HONEST.read_text()) + "\n\n" + "\n".join(parts))
    if cuda:
        (folder / "k.cu").write_text('extern "C" __global__ void k(float* x) { x[0] = 1.0f; }\n')
    return folder


def attack(root: Path, path: str, sandbox: str) -> tuple[Setting, str]:
    """The attacking candidate profiled or inspected by avo (the canary key in its environment): the error avo
    reports, which carries what the candidate read."""
    setting = Setting(root)
    folder = attacking_candidate(setting, cuda=path == "inspect-cuda")
    message = as_avo(RUN, [path, str(folder), pass_through_ncu(root), str(setting.runs), sandbox], setting.home)
    assert "LOOT from" in message, message  # the attacks ran, as far as the last one
    return setting, message


def clean_up(setting: Setting) -> None:
    for pid in tagged(setting.tag):  # only what the candidate left behind, found by its tag
        os.kill(pid, 9)
    setting.tmp_file.unlink(missing_ok=True)


@pytest.mark.parametrize("path", PATHS)
def test_sandboxed_the_attacks_get_nowhere(tmp_path, path):
    setting, message = attack(tmp_path, path, "on")
    try:
        assert CANARY not in message and "LOOT from 0 " not in message  # it read environments: the sandbox's own
        assert gone(setting.tag), f"still running: {tagged(setting.tag)}"
        assert not setting.marker.exists()
        assert setting.outside_writes() == []
    finally:
        clean_up(setting)


@pytest.mark.parametrize("path", PATHS)
def test_unconfined_the_attacks_get_through(tmp_path, path):
    """The evidence that the test above can fail: with the sandbox off, the same candidate escapes."""
    setting, message = attack(tmp_path, path, "off")
    try:
        assert CANARY in message
        assert not gone(setting.tag, within_s=1.0) and setting.marker.exists()
        assert setting.outside_writes() != []
    finally:
        clean_up(setting)


def test_the_pass_through_ncu_runs_the_profiled_program(tmp_path):
    """The stand-in hands the driver its own arguments, so a profile fails on what the candidate did."""
    import subprocess

    ncu = pass_through_ncu(tmp_path)
    log = tmp_path / "log.txt"
    done = subprocess.run([ncu, "--nvtx", "--launch-count", "4", "--csv", "--log-file", str(log), sys.executable,
                           "-c", "print('profiled')"], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "profiled\n") and log.read_text().startswith("==PROF==")
