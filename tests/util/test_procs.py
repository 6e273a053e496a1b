"""Children die with avo and temp folders do not outlive it: a timeout kills the whole group, a SIGKILL of avo takes
its children along (evaluation worker, compile capture), and a killed avo's temp folders go at the next start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from avo.util import procs

ROOT = Path(__file__).resolve().parents[2]


def env_with(tmp: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)}


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for a reaper."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def children(pid: int, needle: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if int(stat[1]) == pid and needle in cmdline:
                found.append(int(entry.name))
    return found


def wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"{what} did not happen within {timeout_s:g} s")


def gone_soon(pids: list[int], within_s: float = 30.0) -> bool:
    """Whether these processes have all died, waited for with a bound that only a survivor reaches (a loaded machine
    delivers a death late)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.02)
    return not any(alive(p) for p in pids)


def test_kill_reaches_the_whole_process_group(tmp_path):
    """What the harness does on a timeout: a grandchild (as a candidate could fork) dies with the worker."""
    marker = tmp_path / "alive"
    script = ("import os, time\n"
              "if os.fork() == 0:\n"
              f"    open({str(marker) + '.tmp'!r}, 'w').write(str(os.getpid()))\n"
              f"    os.rename({str(marker) + '.tmp'!r}, {str(marker)!r})\n"
              "time.sleep(600)\n")
    proc = procs.popen([sys.executable, "-c", script])
    wait_for(marker.exists, 20, "the grandchild starting")
    grandchild = int(marker.read_text())
    procs.kill_group(proc)
    assert proc.returncode == -signal.SIGKILL
    assert gone_soon([grandchild]), "the grandchild survived the kill"


def test_a_child_dies_with_its_parent(tmp_path):
    parent = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom avo.util import procs\n"
                               "procs.popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
                               "print('started', flush=True); time.sleep(600)\n"],
                              stdout=subprocess.PIPE, text=True, env=env_with(tmp_path))
    assert parent.stdout.readline().strip() == "started"
    (child,) = children(parent.pid, "time.sleep(600)")
    parent.kill()
    parent.wait()
    assert gone_soon([child]), "the child outlived its parent's SIGKILL"


def test_killing_avo_inspect_takes_its_compile_capture_along(tmp_path):
    avo = subprocess.Popen([sys.executable, "-m", "avo", "inspect", str(ROOT / "kernels" / "gemm" / "triton_tiled"),
                            "--kernel", "gemm"], env=env_with(tmp_path), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        capture = wait_for(lambda: children(avo.pid, "avo.profile.triton_capture"), 60, "the compile capture")
    finally:
        avo.kill()
        avo.wait()
    assert gone_soon(capture), "avo.profile.triton_capture kept running after avo was killed"


def test_a_killed_evolve_leaves_no_worker_and_its_temp_folder_goes_at_the_next_start(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    avo = subprocess.Popen([sys.executable, "-m", "avo", "evolve", "--kernel", "gemm", "--device", "interpret",
                            "--agent", "heuristic", "--runs-dir", str(tmp_path / "runs"), "--quiet",
                            "--max-candidates", "3"], env=env_with(tmp), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        worker = wait_for(lambda: children(avo.pid, "avo.evaluate.worker"), 60, "an evaluation worker")
    finally:
        avo.kill()
        avo.wait()
    assert gone_soon(worker), "the evaluation worker kept running after avo was killed"
    assert [p.name for p in tmp.glob("avo-eval-*")], "the killed evolve's temp folder should still be there"
    done = subprocess.run([sys.executable, "-m", "avo", "runs", "--runs-dir", str(tmp_path / "runs")],
                          env=env_with(tmp), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not list(tmp.glob("avo-*")), "the next start did not sweep the dead run's temp folder"


def test_the_sweep_keeps_the_folders_of_living_processes(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for pid in (os.getpid(), os.getppid(), dead.pid):
        (tmp_path / f"avo-eval-{pid}-x").mkdir()
    (tmp_path / "avo-eval-notapid").mkdir()
    assert procs.sweep_stale(tmp_path) == [f"avo-eval-{dead.pid}-x"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"avo-eval-{os.getpid()}-x", f"avo-eval-{os.getppid()}-x", "avo-eval-notapid"])


def test_a_child_whose_starter_died_before_it_could_ask_to_die_with_it_exits_before_running(tmp_path, monkeypatch):
    """The race a SIGKILL of avo can land in: between the fork and the child's PR_SET_PDEATHSIG the starter dies, and
    the child, now another process's, would never get the signal. It checks who its parent is and exits instead
    (staged here by making the starter look like another process to the child)."""
    made = tmp_path / "ran"
    with monkeypatch.context() as patched:
        patched.setattr(os, "getpid", lambda: 1)  # the pid the child will find is not its parent's
        orphan = procs.popen(["sh", "-c", f"touch {made}"])
    assert orphan.wait(timeout=60) == 1 and not made.exists()
    assert procs.popen(["sh", "-c", f"touch {made}"]).wait(timeout=60) == 0 and made.exists()
