"""What avo's death signal misses, the janitor kills: bubblewrap's sandbox init in its first milliseconds, held there
for real (bwrap's --userns-block-fd stops the outer bwrap exactly where the init waits for its go-ahead, before it
asks to die with its parent), and any process that escaped the signal by leaving its parent, as a double fork does.
Each case runs once without the janitor too, to show the process would otherwise outlive avo."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import needs
import pytest
from test_procs import alive, env_with, gone_soon, wait_for

from avo.util import janitor

# A stand-in for avo: starts its janitor (or not), then through procs.popen either a child that double-forks a
# sleeper under PID 1 ("escape") or a sandbox held at its init's first step ("sandbox"); prints what it made, waits.
FAKE_AVO = r"""
import json, os, subprocess, sys
from pathlib import Path
from avo.evaluate import sandbox
from avo.util import janitor, procs

kind, keep, scratch, block_r = sys.argv[1], sys.argv[2] == "janitor", Path(sys.argv[3]), int(sys.argv[4])
if not keep:
    janitor.ensure = lambda: 0
made = {"janitor": janitor.ensure() if keep else None}
if kind == "escape":
    script = ("import os, sys, time\n"
              "if os.fork(): os._exit(0)\n"
              "os.setsid(); print(os.getpid(), flush=True); time.sleep(600)\n")
    child = procs.popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    made["orphan"] = int(child.stdout.readline())
    child.wait()
else:
    cmd = sandbox.command(["/bin/sleep", "600"], writable=[scratch], cwd=scratch)
    info_r, info_w = os.pipe()
    # block_r: never written, and its write end held by the test, so that not even this process's death ends the
    # outer bwrap's wait on it before it lets the init go on: only its death signal does
    cmd[1:1] = ["--unshare-user", "--info-fd", str(info_w), "--userns-block-fd", str(block_r)]
    outer = procs.popen(cmd, pass_fds=(info_w, block_r))
    os.close(info_w)
    os.close(block_r)
    made["outer"], made["orphan"] = outer.pid, json.loads(os.fdopen(info_r).read())["child-pid"]
print(json.dumps(made), flush=True)
sys.stdin.read()
"""


def start_fake_avo(tmp_path, kind: str, keep: bool, block_r: int = -1) -> tuple[subprocess.Popen, dict]:
    avo = subprocess.Popen([sys.executable, "-c", FAKE_AVO, kind, "janitor" if keep else "none", str(tmp_path),
                            str(block_r)], pass_fds=(block_r,) if block_r >= 0 else (),
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env_with(tmp_path))
    line = avo.stdout.readline()
    if not line:
        avo.kill()
        pytest.fail(f"the stand-in for avo did not start its {kind} (exit {avo.wait()})")
    return avo, json.loads(line)


def kill(avo: subprocess.Popen) -> None:
    avo.kill()
    avo.wait()


@pytest.mark.parametrize("keep", [True, False], ids=["janitor", "none"])
def test_a_process_that_left_its_parent_dies_with_avo_only_through_the_janitor(tmp_path, keep):
    avo, made = start_fake_avo(tmp_path, "escape", keep)
    orphan = made["orphan"]
    try:
        assert alive(orphan)
        kill(avo)
        if keep:
            assert gone_soon([orphan]), "the double-forked sleeper outlived avo and its janitor"
            assert gone_soon([made["janitor"]]), "the janitor did not exit once its work was done"
        else:
            assert alive(orphan)  # its parent exited long before avo died: no death signal reaches it
    finally:
        if alive(orphan):
            os.kill(orphan, signal.SIGKILL)


def _userns_block_works() -> bool:
    from avo.evaluate import sandbox

    bwrap = sandbox.find()
    if bwrap is None:
        return False
    read, write = os.pipe()
    try:
        done = subprocess.run([bwrap, "--unshare-user", "--info-fd", str(write), *sandbox.BASE, "--", "/bin/true"],
                              pass_fds=(write,), capture_output=True, timeout=60)
    finally:
        os.close(read)
        os.close(write)
    return done.returncode == 0


@needs.bwrap
@pytest.mark.parametrize("keep", [True, False], ids=["janitor", "none"])
def test_a_sandbox_init_held_before_it_asks_to_die_with_avo_dies_with_avo_only_through_the_janitor(tmp_path, keep):
    """The leftover a killed evolve once left: bwrap's init, under PID 1, asleep on an eventfd for good."""
    if not _userns_block_works():
        pytest.skip("bwrap cannot make a user namespace here (--userns-block-fd needs one)")
    block_r, block_w = os.pipe()
    try:
        avo, made = start_fake_avo(tmp_path, "sandbox", keep, block_r)
    finally:
        os.close(block_r)
    orphan = made["orphan"]
    try:
        assert alive(orphan) and alive(made["outer"])
        kill(avo)
        assert gone_soon([made["outer"]]), "the outer bwrap did not die with avo"
        if keep:
            assert gone_soon([orphan]), "the sandbox's init outlived avo and its janitor"
            assert gone_soon([made["janitor"]]), "the janitor did not exit once its work was done"
        else:
            assert alive(orphan)  # the bubblewrap window: nothing else would ever kill it
    finally:
        if alive(orphan):
            os.kill(orphan, signal.SIGKILL)
        os.close(block_w)


def test_the_sweep_kills_the_owners_marked_processes_and_no_other(tmp_path):
    owner = os.getpid() + 1_000_000  # no process of this run carries this mark but the ones made here
    sleep = [sys.executable, "-c", "import time; time.sleep(600)"]
    theirs = subprocess.Popen(sleep, env={**os.environ, janitor.MARK: str(owner)})
    other = subprocess.Popen(sleep, env={**os.environ, janitor.MARK: str(owner + 1)})
    unmarked = subprocess.Popen(sleep, env={k: v for k, v in os.environ.items() if k != janitor.MARK})
    try:
        wait_for(lambda: theirs.pid in janitor.marked(owner, os.getpid()), 30, "the marked sleeper showing")
        assert janitor.sweep(owner) == [theirs.pid]
        assert theirs.wait(timeout=30) == -signal.SIGKILL
        assert other.poll() is None and unmarked.poll() is None
    finally:
        for proc in (theirs, other, unmarked):
            proc.kill()
            proc.wait()


def test_popen_marks_each_child_with_its_avo(tmp_path):
    from avo.util import procs

    code, out, _ = procs.run([sys.executable, "-c", f"import os; print(os.environ[{janitor.MARK!r}])"],
                             timeout_s=60, env={"PATH": os.environ.get("PATH", "")})
    assert (code, out.strip()) == (0, str(os.getpid()))


def test_one_janitor_per_avo_and_a_failed_start_is_tried_again(monkeypatch):
    monkeypatch.setattr(janitor, "_pipes", {})

    def fail(*args, **kwargs):
        raise OSError("no spawn here")

    with monkeypatch.context() as patched:
        patched.setattr(os, "posix_spawn", fail)
        assert janitor.ensure() is None and janitor._pipes == {}  # no janitor: the sandbox goes on without one
    first = janitor.ensure()
    try:
        assert first > 0 and janitor.ensure() == 0  # started once, then known
        assert alive(first)
    finally:
        os.close(janitor._pipes.pop(os.getpid()))  # its owner's end: the janitor sweeps (nothing) and exits
    assert gone_soon([first]), "the janitor did not exit when its pipe closed"
