"""What a candidate could plant in a lineage or its folder, and what avo then does: git runs none of its drivers or
hooks, sees none of avo's secrets; links and special files are refused, not followed, committed or blocked on."""

from __future__ import annotations

import os
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from avo.errors import UserError
from avo.run.lineage import gitcmd
from avo.run.lineage.repo import Lineage, content_hash
from avo.util.safe_files import UnsafeFile
from lineage_fakes import result, write_candidate
from read_only import read_only_tree


@pytest.fixture
def two(tmp_path):
    lineage = Lineage.init(tmp_path / "lineage")
    work = tmp_path / "work"
    write_candidate(work, "BLOCK = 64\n", {"sub/helper.cu": "// one\n"})
    first = lineage.commit(work, parent=None, result=result(), model="m", rationale="first")
    write_candidate(work, "BLOCK = 128\n", {"sub/helper.cu": "// two\n"})
    second = lineage.commit(work, parent=first, result=result(), model="m", rationale="second")
    return lineage, first, second, work


def _driver(tmp_path: Path) -> tuple[Path, Path]:
    """A program that leaves a marker file when run (as a textconv, diff, filter or hook would be)."""
    marker, script = tmp_path / "DRIVER-RAN", tmp_path / "driver.sh"
    script.write_text(f'#!/bin/sh\ntouch "{marker}"\ncat "$1" 2>/dev/null\n')
    script.chmod(0o755)
    return marker, script


def _plant(git_dir: Path, script: Path) -> None:
    """What a candidate with write access to the lineage would leave there: attributes naming a driver, the
    driver in the config (textconv, external diff, filter, hooks path, an include), a hook."""
    (git_dir / "info").mkdir(exist_ok=True)
    (git_dir / "info" / "attributes").write_text("* diff=avo filter=avo\n")
    hooks = git_dir / "planted-hooks"
    hooks.mkdir(exist_ok=True)
    for hook in ("reference-transaction", "post-update"):
        (hooks / hook).write_text(script.read_text())
        (hooks / hook).chmod(0o755)
    included = git_dir / "planted.cfg"
    included.write_text(f'[diff "avo"]\n\tcommand = {script}\n')
    with open(git_dir / "config", "a") as config:
        config.write(f'[diff "avo"]\n\ttextconv = {script}\n[diff]\n\texternal = {script}\n'
                     f'[filter "avo"]\n\tclean = {script}\n\tsmudge = {script}\n'
                     f'[core]\n\thooksPath = {hooks}\n[include]\n\tpath = {included}\n')


def test_a_planted_textconv_driver_hook_or_include_never_runs(two, tmp_path):
    lineage, first, second, work = two
    marker, script = _driver(tmp_path)
    # the attack itself works on plain git: the lineage's own diff would have run the driver
    _plant(lineage.path, script)
    subprocess.run(["git", f"--git-dir={lineage.path}", "diff", f"refs/avo/{first}", f"refs/avo/{second}"],
                   capture_output=True)
    assert marker.exists()
    marker.unlink()

    assert "+BLOCK = 128" in lineage.diff(first, second)
    assert "kernel.py" in lineage.diff(first, second, stat=True)
    assert "+BLOCK = 128" in gitcmd.run_git(lineage.path, "log", "-p", f"refs/avo/{second}")
    assert "+BLOCK = 128" in gitcmd.run_git(lineage.path, "show", f"refs/avo/{second}")
    assert gitcmd.run_git(lineage.path, "show", f"refs/avo/{second}:kernel.py") == "BLOCK = 128\n"
    _plant(lineage.path, script)  # restored by the reads: planted again before the writes (update-ref runs hooks)
    write_candidate(work, "BLOCK = 256\n")
    third = lineage.commit(work, parent=second, result=result(), model="m", rationale="third")
    lineage.accept(third)
    lineage.checkout(third, tmp_path / "out")
    assert not marker.exists()
    assert (lineage.path / "config").read_text() == gitcmd.CONFIG
    assert not (lineage.path / "info" / "attributes").exists()
    assert lineage.best == third and (tmp_path / "out" / "kernel.py").read_text() == "BLOCK = 256\n"


def test_an_in_tree_gitattributes_is_never_committed(two, tmp_path):
    lineage, _, second, work = two
    marker, script = _driver(tmp_path)
    (work / ".gitattributes").write_text("* diff=avo\n")
    (work / "sub" / ".gitmodules").write_text("[submodule \"x\"]\n")
    (work / ".git").mkdir()
    (work / ".git" / "config").write_text(f'[diff "avo"]\n\ttextconv = {script}\n')
    cid = lineage.commit(work, parent=second, result=result(), model="m", rationale="hidden files")
    assert [path for path, _ in lineage.files(cid)] == ["kernel.py", "sub/helper.cu"]
    lineage.diff(second, cid)
    assert not marker.exists()


def test_git_runs_with_avos_settings_and_no_secrets(tmp_path, monkeypatch):
    """A stand-in `git` on the PATH records the arguments and environment every lineage git call gets."""
    fake = tmp_path / "bin" / "git"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$@" >> "{tmp_path}/args"\nenv >> "{tmp_path}/env"\n')
    fake.chmod(0o755)
    lineage = tmp_path / "lineage"
    lineage.mkdir()
    (lineage / "config").write_text(gitcmd.CONFIG)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-not-a-real-key-0123456789")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "hunter2-hunter2")
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    gitcmd.run_git(lineage, "diff", "a", "b")
    args, env = (tmp_path / "args").read_text(), (tmp_path / "env").read_text()
    for setting in ("core.hooksPath=/dev/null", "core.attributesFile=/dev/null", "protocol.allow=never"):
        assert f"-c {setting}" in args
    assert f"--git-dir={lineage} diff --no-textconv --no-ext-diff a b" in args
    assert "sk-ant-" not in env and "hunter2" not in env and "GIT_DIR=" not in env
    assert f"HOME={os.devnull}\n" in env and "GIT_CONFIG_NOSYSTEM=1\n" in env
    assert f"GIT_CONFIG_GLOBAL={os.devnull}\n" in env


def test_gitpython_starts_only_its_object_readers(two):
    lineage, first, _, _ = two
    assert lineage.record(first)["cid"] == first  # read through `git cat-file`, started as run_git starts it
    with pytest.raises(RuntimeError, match="run_git"):
        lineage.repo.git.status()


def test_a_changed_config_of_a_read_only_lineage_is_refused(two):
    lineage, first, _, _ = two
    with open(lineage.path / "config", "a") as config:
        config.write("[diff \"avo\"]\n\ttextconv = /bin/true\n")
    with read_only_tree(lineage.path), pytest.raises(UserError, match="changed outside avo"):
        lineage.diff(first, first)


def test_a_hard_link_to_a_file_outside_is_refused_not_committed(two, tmp_path):
    lineage, _, second, work = two
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the lineage\n")
    os.link(secret, work / "stolen.py")
    before = lineage.cids()
    with pytest.raises(UnsafeFile, match=r"stolen.py is a hard link \(2 names\)"):
        content_hash(work)
    with pytest.raises(UnsafeFile, match="stolen.py is a hard link"):
        lineage.commit(work, parent=second, result=result(), model="m", rationale="link")
    (work / "stolen.py").unlink()
    (work / "escape").symlink_to(tmp_path)
    with pytest.raises(UnsafeFile, match="escape is a symlink"):
        lineage.commit(work, parent=second, result=result(), model="m", rationale="symlink")
    assert lineage.cids() == before and secret.read_text() == "not for the lineage\n"


def _bounded(fn, seconds: float = 20.0):
    """fn() in a thread: what it raised or returned, or a failure (not a hung suite) if it blocks."""
    out: dict = {}

    def target():
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: B036 (handed back to the test)
            out["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    return thread.is_alive(), out


def test_a_fifo_in_the_candidate_folder_is_refused_promptly(two):
    lineage, _, second, work = two
    fifo = work / "sub" / "pipe.cu"
    os.mkfifo(fifo)
    try:
        for fn in (lambda: content_hash(work), lambda: lineage.find_duplicate(work),
                   lambda: lineage.commit(work, parent=second, result=result(), model="m", rationale="fifo")):
            hung, out = _bounded(fn)
            assert not hung, "blocked on the FIFO"
            assert isinstance(out.get("error"), UnsafeFile) and "sub/pipe.cu is a FIFO" in str(out["error"])
    finally:  # a regression blocks in open(); a writer lets it go
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass


def test_a_lineage_entry_avo_never_commits_is_not_checked_out(two, tmp_path):
    """An imported lineage can hold anything git can: a symlink, a hidden name. Checkout refuses before writing."""
    lineage, _, second, _ = two
    git = ["git", f"--git-dir={lineage.path}"]

    def blob(data: str) -> str:
        return subprocess.run([*git, "hash-object", "-w", "--stdin"], input=data, capture_output=True, text=True,
                              check=True).stdout.strip()

    record = subprocess.run([*git, "rev-parse", f"refs/avo/{second}:avo.json"], capture_output=True, text=True,
                            check=True).stdout.strip()
    dest = tmp_path / "dest"
    write_candidate(dest, "KEEP = 1\n")
    for mode, name in (("120000", "kernel.py"), ("100644", ".gitattributes")):
        listing = f"100644 blob {record}\tavo.json\n{mode} blob {blob('/etc/passwd')}\t{name}\n"
        tree = subprocess.run([*git, "mktree"], input=listing, capture_output=True, text=True,
                              check=True).stdout.strip()
        message = f"c9000: crafted\n\nAvo-Candidate: c9{mode[:3]}\nAvo-Parent: none\nAvo-Status: correct\n"
        commit = subprocess.run([*git, "commit-tree", tree], input=message, capture_output=True, text=True,
                                check=True, env={**os.environ, "GIT_AUTHOR_NAME": "x", "GIT_AUTHOR_EMAIL": "x@x",
                                                 "GIT_COMMITTER_NAME": "x", "GIT_COMMITTER_EMAIL": "x@x"})
        subprocess.run([*git, "update-ref", f"refs/avo/c9{mode[:3]}", commit.stdout.strip()], check=True)
        with pytest.raises(UserError, match=f"'{name}' in the lineage is"):
            lineage.checkout(f"c9{mode[:3]}", dest)
        assert (dest / "kernel.py").read_text() == "KEEP = 1\n" and not (dest / "kernel.py").is_symlink()
    assert not stat.S_ISLNK((dest / "kernel.py").lstat().st_mode)
