"""SIGKILL a real process that commits and accepts in a loop: the lineage stays clean and every candidate whole."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from lineage_fakes import fsck_problems

from avo.run.lineage.repo import Lineage, content_hash

WRITER = r"""
import os, random, signal, sys
from pathlib import Path
from avo.evaluate.result import EvalResult
from avo.run.lineage.repo import Lineage

lineage, src, mode = Lineage.open(Path(sys.argv[1])), Path(sys.argv[2]), sys.argv[3]
if mode == "die-before-ref":  # objects written, ref not yet: the worst moment
    update = lineage._update_refs
    def dying(updates, message):
        if updates[0].startswith("create refs/avo/"):
            os.kill(os.getpid(), signal.SIGKILL)
        return update(updates, message)
    lineage._update_refs = dying
src.mkdir(exist_ok=True)
step = 0
while True:
    (src / "kernel.py").write_text(f"# {os.getpid()} {step}\n" + "x = 1\n" * random.randint(1, 3000))
    (src / "sub").mkdir(exist_ok=True)
    (src / "sub" / "part.cu").write_text(f"// {step}\n")
    parent = lineage.main or (lineage.cids()[-1] if len(lineage) else None)
    result = EvalResult(status="correct" if step % 2 else "crash", fitness=1.0 + step / 100, message="m")
    cid = lineage.commit(src, parent=parent, result=result, model="m", rationale=f"step {step}")
    if step % 2:
        lineage.accept(cid)
    print(cid, flush=True)
    step += 1
"""


def spawn(lineage_path: Path, src: Path, mode: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(lineage_path), str(src), mode],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def check_whole(path: Path, tmp: Path) -> list[str]:
    """Every candidate with a ref is complete: its record, its files, and their hash agree."""
    assert not fsck_problems(path)
    lineage = Lineage.open(path)
    cids = lineage.cids()
    assert cids == [f"c{i:04d}" for i in range(len(cids))]  # no gaps: a lost candidate's id is reused
    for info in lineage.log():
        record = lineage.record(info.cid)
        assert record["cid"] == info.cid and record["eval"]["status"] == info.status
        out = tmp / "check" / info.cid
        lineage.checkout(info.cid, out)
        assert (out / "kernel.py").is_file() and (out / "sub" / "part.cu").is_file()
        assert content_hash(out) == record["content_hash"]
    if lineage.best:
        best = lineage.info(lineage.best)
        assert best.accepted and best.status == "correct"
    lineage.close()
    return cids


def test_sigkill_mid_write_leaves_clean_lineage(tmp_path):
    path = tmp_path / "lineage"
    Lineage.init(path).close()
    rng = random.Random(7)
    total = 0
    for round_ in range(5):
        writer = spawn(path, tmp_path / f"src{round_}", "loop")
        for _ in range(rng.randint(1, 4)):
            assert writer.stdout.readline(), writer.stderr.read()
        time.sleep(rng.uniform(0.0, 0.05))
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
        writer.stdout.close()
        writer.stderr.close()
        cids = check_whole(path, tmp_path / f"r{round_}")
        assert len(cids) > total
        total = len(cids)


def test_killed_between_objects_and_ref_leaves_no_candidate(tmp_path):
    path = tmp_path / "lineage"
    Lineage.init(path).close()
    writer = spawn(path, tmp_path / "src", "die-before-ref")
    writer.communicate(timeout=60)
    assert writer.returncode == -signal.SIGKILL
    assert check_whole(path, tmp_path) == []
    loose = subprocess.run(["git", f"--git-dir={path}", "count-objects"], capture_output=True, text=True).stdout
    assert not loose.startswith("0 objects")  # it did write objects: they are merely unreferenced
    writer = spawn(path, tmp_path / "src", "loop")
    assert writer.stdout.readline().strip() == "c0000"  # the id of the lost candidate is reused
    writer.kill()
    writer.communicate()
    assert check_whole(path, tmp_path / "after")[0] == "c0000"
