"""The janitor: a process that outlives avo just long enough to kill what avo's death signal missed.

Every child of avo's dies with it (procs.popen: `PR_SET_PDEATHSIG`), and everything inside a sandbox dies with the
sandbox's init. One process escapes both: that init itself, in its first milliseconds. bubblewrap clones it into the
new namespaces, and it asks to die with its parent only after it has mounted the sandbox; before that it waits on an
eventfd for the outer bwrap's go-ahead. If avo is killed then, the outer bwrap dies with avo, and the init is neither
signalled nor woken: it sleeps under PID 1 for good, holding the worker's pipes, or, past the wait, starts the worker
with no one left to stop it. (bubblewrap 0.8 to 0.11 all ask after the setup.)

So the first sandbox command an avo process builds starts its janitor (`ensure`). The janitor holds the read end of a
pipe whose write end avo alone holds; when avo is gone, for whatever reason, the pipe reads end-of-file, and the
janitor kills every process whose environment carries `AVO_OWNER=<avo's pid>` (procs.popen sets it on every child;
a clone such as the sandbox's init keeps its parent's), scanning until it finds none, then exits. It imports nothing
of avo's and starts with `python -I -S`: a few milliseconds, once per avo.
"""

from __future__ import annotations

import os
import signal
import sys
import time

MARK = "AVO_OWNER"
QUIET_SCANS = 3  # scans in a row that found nothing: the janitor's work is done
GIVE_UP_S = 60.0  # a process it cannot kill (another user's) does not keep it forever
_pipes: dict[int, int] = {}  # avo's pid -> the write end it keeps open while it lives


def owner_env(env: dict | None = None) -> dict:
    """`env` (default: avo's own) with this avo's mark, for a child the janitor must find."""
    return {**(os.environ if env is None else env), MARK: str(os.getpid())}


def ensure() -> int | None:
    """Start this avo process's janitor unless it runs already (a forked child starts its own): its PID, 0 if it
    ran already, None if it could not start (the sandbox works without it, and the next sandbox tries again)."""
    pid = os.getpid()
    if pid in _pipes:
        return 0
    read, write = os.pipe()  # neither end inherited by any other child of avo's
    os.set_inheritable(read, True)
    try:  # with an empty environment: no key of avo's, and no mark (it is no process of its owner's to kill)
        spawned = os.posix_spawn(sys.executable, [sys.executable, "-I", "-S", __file__, str(pid), str(read)], {},
                                 setsid=True, file_actions=[(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0)
                                                            for fd in (0, 1, 2)])
    except OSError:
        os.close(write)
        return None
    finally:
        os.close(read)
    _pipes[pid] = write
    return spawned


def marked(owner: int, me: int) -> list[int]:
    """The processes whose environment carries `owner`'s mark (those this user may read), `me` left out."""
    mark = f"\0{MARK}={owner}\0".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                if mark in b"\0" + f.read() + b"\0":
                    found.append(int(entry.name))
        except OSError:  # gone, or another user's
            continue
    return found


def sweep(owner: int) -> list[int]:
    """Kill `owner`'s marked processes until QUIET_SCANS scans in a row find none; the PIDs killed."""
    killed, quiet, deadline = [], 0, time.monotonic() + GIVE_UP_S
    while quiet < QUIET_SCANS and time.monotonic() < deadline:
        found = marked(owner, os.getpid())
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except OSError:
                pass
        quiet = 0 if found else quiet + 1
        time.sleep(0.02)
    return killed


def main(argv: list[str]) -> None:
    owner, read = int(argv[0]), int(argv[1])
    while os.read(read, 1):  # nothing is ever written: this returns b"" once avo's end is closed
        pass
    sweep(owner)


if __name__ == "__main__":
    main(sys.argv[1:])
