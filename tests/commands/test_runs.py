"""`avo runs / show / diff / rollback / export / import`, through the real CLI entry point."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest
from lineage_fakes import result, write_candidate
from read_only import read_only_tree
from rich.console import Console

import avo.commands.runs as runs_command
from avo.cli import main
from avo.config import RunConfig
from avo.run.directory import Run


@pytest.fixture
def runs_dir(tmp_path):
    """One run: baseline c0000 (500 TFLOPS), c0001 incorrect, c0002 accepted (620 TFLOPS)."""
    runs = tmp_path / "runs"
    run = Run.create(RunConfig(kernel="gemm"), runs_dir=runs, gpu="h200", agent="heuristic", run_id="r1")
    lineage, src = run.lineage, tmp_path / "src"
    with run.lock():
        write_candidate(src, "BLOCK_M = 64\nNUM_WARPS = 4\n")
        lineage.commit(src, parent=None, result=result(fitness=0.714, tflops=500), model="heuristic",
                       rationale="the shipped seed")
        lineage.tag_baseline("c0000")
        write_candidate(src, "BLOCK_M = 128\nNUM_WARPS = 4\n")
        lineage.commit(src, parent="c0000", result=result("incorrect"), model="heuristic", rationale="bigger tile")
        write_candidate(src, "BLOCK_M = 128\nNUM_WARPS = 8\n")
        lineage.commit(src, parent="c0001", result=result(fitness=0.886, tflops=620), model="heuristic",
                       rationale="more warps for the bigger tile")
        lineage.accept("c0002")
        run.save_eval("c0002", result(fitness=0.886, tflops=620))
        run.append_event("turn", text="hello")
        run.set_state("finished")
        lineage.checkout("c0002", run.workspace)
    run.close()
    return runs


def avo(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_runs_table(runs_dir, capsys):
    code, out, _ = avo(capsys, "runs", "--runs-dir", runs_dir)
    assert code == 0
    row = next(line for line in out.splitlines() if "r1" in line)
    for cell in ("gemm", "h200", "heuristic", "2/1", "0.886x", "finished"):
        assert cell in row


def test_show_run_and_candidate(runs_dir, capsys):
    code, out, _ = avo(capsys, "show", "r1", "--runs-dir", runs_dir)
    assert code == 0
    assert "candidates 3 (2 correct, 1 failed), 1 accepted; best c0002 0.886x; baseline c0000; main c0002" in out
    assert re.search(r"c0001 .*c0000 .*incorrect", out)
    code, out, _ = avo(capsys, "show", "r1", "best^", "--runs-dir", runs_dir)
    assert code == 0 and out.startswith("c0001 ") and "status incorrect (check.mismatch)" in out
    code, out, _ = avo(capsys, "show", "r1", "c0002", "--runs-dir", runs_dir)
    assert "c0002 [best] [main]" in out and "more warps for the bigger tile" in out
    assert re.search(r"bench .*4096x4096x4096 .*yes .*620\.0 .*700\.0 .*0\.886", out)
    assert "files: kernel.py (28 B)" in out


def test_diff_best_baseline(runs_dir, capsys):
    code, out, _ = avo(capsys, "diff", "best", "baseline", "--runs-dir", runs_dir)
    assert code == 0
    lines = out.splitlines()
    assert "A = best = c0002: correct, fitness 0.886, gpu timing on h200" in lines
    assert "B = baseline = c0000: correct, fitness 0.714, gpu timing on h200" in lines
    assert {"-BLOCK_M = 128", "+BLOCK_M = 64", "-NUM_WARPS = 8", "+NUM_WARPS = 4", "--- a/kernel.py"} <= set(lines)
    assert "avo.json" not in out
    assert re.search(r"4096x4096x4096 .*620\.0 .*500\.0 .*1\.240", out)
    assert re.search(r"8192x8192x8192 .*558\.0 .*450\.0 .*1\.240", out)


def test_diff_is_highlighted_on_a_terminal(runs_dir, capsys, monkeypatch):
    monkeypatch.setattr(runs_command, "_console", lambda: Console(force_terminal=True, color_system="truecolor",
                                                                  width=160))
    code, out, _ = avo(capsys, "diff", "baseline", "best", "--runs-dir", runs_dir)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert code == 0 and "\x1b[" in out
    assert "+BLOCK_M = 128" in plain and "-NUM_WARPS = 4" in plain and "A = baseline = c0000: correct" in plain


def test_diff_stat_and_json(runs_dir, capsys):
    code, out, _ = avo(capsys, "diff", "c0002^", "c0002", "--stat", "--runs-dir", runs_dir)
    assert code == 0 and "kernel.py | 2 +-" in out and "@@" not in out
    assert "A = c0002^ = c0001: incorrect (check.mismatch)" in out
    code, out, _ = avo(capsys, "diff", "best", "baseline", "--json", "--run", "r1", "--runs-dir", runs_dir)
    data = json.loads(out)
    assert data["a"]["cid"] == "c0002" and data["b"]["status"] == "correct" and "+BLOCK_M = 64" in data["diff"]
    assert [round(c["ratio"], 3) for c in data["cases"]] == [1.24, 1.24] and data["cases"][0]["tflops_a"] == 620.0


def test_rollback_moves_main_and_workspace(runs_dir, capsys):
    code, out, _ = avo(capsys, "rollback", "r1", "baseline", "--runs-dir", runs_dir)
    assert code == 0 and "now at c0000 (main was c0002)" in out
    run = Run.open("r1", runs_dir)
    assert run.lineage.main == "c0000" and run.lineage.best == "c0002" and len(run.lineage) == 3
    assert (run.workspace / "kernel.py").read_text() == "BLOCK_M = 64\nNUM_WARPS = 4\n"
    assert run.events()[-1]["kind"] == "rollback" and run.events()[-1]["previous_main"] == "c0002"


LOCKER = """
import sys, time
from pathlib import Path
from avo.run.directory import Run
with Run.open("r1", Path(sys.argv[1])).lock():
    print("locked", flush=True)
    time.sleep(120)
"""


@pytest.mark.parametrize("case", ["unknown run", "unknown candidate", "corrupt run.json", "locked run",
                                  "unwritable export", "import of a non-export", "import of a bad bundle",
                                  "import of a truncated export", "runs dir is a file"])
def test_bad_input_is_one_line_exit_2(runs_dir, capsys, tmp_path, case):
    holder = None
    args = {"unknown run": ["show", "nope"], "unknown candidate": ["diff", "c0042", "best"],
            "corrupt run.json": ["show", "r1"], "locked run": ["rollback", "r1", "c0000"],
            "unwritable export": ["export", "r1", "-o", tmp_path / "no" / "such" / "dir" / "r1.tar"],
            "import of a non-export": ["import", tmp_path / "junk.tar"],
            "import of a bad bundle": ["import", tmp_path / "bad.tar"],
            "import of a truncated export": ["import", tmp_path / "cut.tar.gz"],
            "runs dir is a file": ["runs"]}[case]
    if case == "import of a truncated export":
        assert main(["export", "r1", "-o", str(tmp_path / "whole.tar.gz"), "--runs-dir", str(runs_dir)]) == 0
        whole = (tmp_path / "whole.tar.gz").read_bytes()
        with tarfile.open(tmp_path / "whole.tar.gz") as tar:  # cut where the last file's header starts
            last = tar.getmembers()[-1].offset
        (tmp_path / "cut.tar.gz").write_bytes(whole[:last])
        shutil.rmtree(runs_dir / "r1")
        capsys.readouterr()
    if case == "runs dir is a file":
        shutil.rmtree(runs_dir)
        runs_dir.write_text("not a folder")
    if case == "corrupt run.json":
        (runs_dir / "r1" / "run.json").write_text("{not json")
    if case == "import of a non-export":
        (tmp_path / "junk.tar").write_bytes(b"\x00garbage" * 100)
    if case == "import of a bad bundle":
        with tarfile.open(tmp_path / "bad.tar", "w") as tar:
            for name, data in (("manifest.json", json.dumps({"format": "avo-run-export", "run_id": "x"}).encode()),
                               ("run.json", json.dumps({"config": {}}).encode()), ("lineage.bundle", b"nope")):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    if case == "locked run":
        holder = subprocess.Popen([sys.executable, "-c", LOCKER, str(runs_dir)], stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "locked"
    try:
        code, out, err = avo(capsys, *args, "--runs-dir", runs_dir)
    finally:
        if holder:
            holder.kill()
            holder.communicate()
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("avo: error: ")
    if holder:
        assert f"PID {holder.pid}" in err
    if case == "import of a truncated export":
        assert "truncated or damaged" in err and not (runs_dir / "r1").exists()
    if runs_dir.is_dir():
        assert not list(runs_dir.glob(".importing-*"))


def test_export_import_round_trip(runs_dir, capsys, tmp_path):
    archive = tmp_path / "r1.tar"
    code, out, _ = avo(capsys, "export", "r1", "-o", archive, "--runs-dir", runs_dir)
    assert code == 0 and archive.is_file()
    elsewhere = tmp_path / "elsewhere"
    code, out, _ = avo(capsys, "import", archive, "--runs-dir", elsewhere)
    assert code == 0 and "3 candidates" in out
    original, copy = Run.open("r1", runs_dir), Run.open("r1", elsewhere)
    refs = lambda run: subprocess.run(["git", f"--git-dir={run.lineage.path}", "for-each-ref"],  # noqa: E731
                                      capture_output=True, text=True).stdout
    assert refs(copy) == refs(original)
    assert copy.events() == original.events() and copy.load_eval("c0002") == original.load_eval("c0002")
    assert copy.counters()["best"] == "c0002" and copy.info()["imported"]["from"] == "r1.tar"
    assert (copy.workspace / "kernel.py").read_text() == (original.workspace / "kernel.py").read_text()
    code, out, _ = avo(capsys, "diff", "best", "baseline", "--run", "r1", "--runs-dir", elsewhere)
    assert code == 0 and "+BLOCK_M = 64" in out
    code, _, err = avo(capsys, "import", archive, "--runs-dir", elsewhere)
    assert code == 2 and "already exists" in err


@pytest.mark.parametrize("plant", ["hard link", "fifo", "symlink"])
def test_export_refuses_a_link_or_special_file_in_the_run_by_name(runs_dir, capsys, tmp_path, plant):
    """A file outside the run, linked into its profiles, is not carried into the archive; a FIFO is not opened."""
    outside = tmp_path / "outside.txt"
    outside.write_text("not for the archive\n")
    profiles = runs_dir / "r1" / "profiles"
    profiles.mkdir(exist_ok=True)
    planted = profiles / "c0001.txt"
    {"hard link": lambda: os.link(outside, planted), "fifo": lambda: os.mkfifo(planted),
     "symlink": lambda: planted.symlink_to(outside)}[plant]()
    archive = tmp_path / "r1.tar"
    code, _, err = avo(capsys, "export", "r1", "-o", archive, "--runs-dir", runs_dir)
    what = {"hard link": "a hard link (2 names)", "fifo": "a FIFO", "symlink": "a symlink"}[plant]
    assert code == 2 and f"profiles/c0001.txt is {what}" in err and not archive.exists()


def test_runs_lists_the_others_when_one_is_damaged(runs_dir, capsys):
    broken = Run.create(RunConfig(kernel="attention"), runs_dir=runs_dir, gpu="h100", agent="heuristic",
                        run_id="r2")
    broken.close()
    shutil.rmtree(runs_dir / "r2" / "lineage")
    code, out, _ = avo(capsys, "runs", "--runs-dir", runs_dir)
    assert code == 0 and "2/1" in out and re.search(r"r2 .*attention .*unreadable", out)


def test_runs_names_a_run_whose_run_json_is_corrupt(runs_dir, capsys):
    Run.create(RunConfig(kernel="attention"), runs_dir=runs_dir, gpu="h100", agent="heuristic", run_id="r2").close()
    (runs_dir / "r2" / "run.json").write_text('{"config": {"kernel": ')
    code, out, _ = avo(capsys, "runs", "--runs-dir", runs_dir)
    assert code == 0 and "2/1" in out and re.search(r"r2 .*unreadable", out)


@pytest.mark.parametrize("args", [["rollback", "r1", "c0000"], ["report", "r1"]])
def test_a_read_only_runs_dir_is_one_line_exit_2(runs_dir, capsys, args):
    with read_only_tree(runs_dir):
        code, _, err = avo(capsys, *args, "--runs-dir", runs_dir)
    assert code == 2 and err.startswith("avo: error: cannot write ") and len(err.strip().splitlines()) == 1
    assert "make it writable" in err and "internal error" not in err
