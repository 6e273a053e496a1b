"""The lineage: commits, refs, tags, resolve, diff, checkout, duplicates, and (hypothesis) its invariants."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from lineage_fakes import fsck_problems, result, write_candidate

from avo.errors import UserError
from avo.run.lineage.repo import Lineage, content_hash, parse_message


def git(lineage: Lineage, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={lineage.path}", *args], capture_output=True, text=True,
                          check=True).stdout


@pytest.fixture
def three(tmp_path):
    """baseline c0000 (correct), c0001 (incorrect), c0002 (correct, accepted)."""
    lineage = Lineage.init(tmp_path / "lineage")
    src = write_candidate(tmp_path / "src", "BLOCK_M = 64\n", {"sub/helper.cu": "// v1\n"})
    lineage.commit(src, parent=None, result=result(fitness=0.8, tflops=500), model="heuristic", rationale="seed")
    lineage.tag_baseline("c0000")
    write_candidate(src, "BLOCK_M = 128\n", {"sub/helper.cu": "// v1\n"})
    lineage.commit(src, parent="c0000", result=result("incorrect"), model="claude", rationale="bigger tile")
    write_candidate(src, "BLOCK_M = 128\nNUM_STAGES = 3\n")
    lineage.commit(src, parent="c0001", result=result(fitness=0.95, tflops=620), model="claude",
                   rationale="fix the tail\n\n\n\nand pipeline")
    lineage.accept("c0002")
    yield lineage, src
    lineage.close()


def test_commit_records_files_message_and_trailers(three):
    lineage, _ = three
    assert len(lineage) == 3 and lineage.cids() == ["c0000", "c0001", "c0002"]
    info = lineage.info("c0002")
    assert (info.parent, info.status, info.fitness, info.accepted, info.model) == ("c0001", "correct", 0.95, True,
                                                                                     "claude")
    assert info.rationale == "fix the tail\n\nand pipeline"
    assert info.summary.startswith("correct, fitness 0.950x")
    message = git(lineage, "log", "-1", "--format=%B", "refs/avo/c0001")
    assert message.splitlines()[0] == "c0001: incorrect: incorrect: case 1 relative error 0.3 > 0.01"
    for trailer in ("Avo-Candidate: c0001", "Avo-Parent: c0000", "Avo-Status: incorrect", "Avo-Fitness: 0.0"):
        assert trailer in message
    assert git(lineage, "log", "-1", "--format=%an", "refs/avo/c0001").strip() == "claude"
    assert git(lineage, "rev-parse", "refs/avo/c0001^").strip() == info_sha(lineage, "c0000")
    assert sorted(git(lineage, "ls-tree", "-r", "--name-only", "refs/avo/c0000").split()) == [
        "avo.json", "kernel.py", "sub/helper.cu"]
    record = lineage.record("c0002")
    assert record["cid"] == "c0002" and record["parent"] == "c0001" and record["model"] == "claude"
    assert record["eval"]["status"] == "correct" and record["eval"]["timing_source"] == "gpu"
    assert [c["tflops"] for c in record["eval"]["cases"]] == [620.0, 558.0]
    assert lineage.record("c0001")["eval"]["rule"] == "check.mismatch"
    assert lineage.files("c0002") == [("kernel.py", len("BLOCK_M = 128\nNUM_STAGES = 3\n"))]
    assert not fsck_problems(lineage.path)


def info_sha(lineage: Lineage, cid: str) -> str:
    return lineage.info(cid).sha


def test_refs_tags_and_main(three):
    lineage, _ = three
    refs = git(lineage, "for-each-ref", "--format=%(refname)").split()
    assert {f"refs/avo/c000{i}" for i in range(3)} <= set(refs)
    assert "refs/accepted/c0002" in refs and "refs/accepted/c0000" not in refs
    assert (lineage.best, lineage.baseline, lineage.main) == ("c0002", "c0000", "c0002")
    assert git(lineage, "rev-parse", "best").strip() == info_sha(lineage, "c0002")
    assert git(lineage, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    # main's reflog tells its story: set at the baseline, advanced by the accept
    assert git(lineage, "reflog", "--format=%gs", "main").split("\n")[:2] == ["accept c0002", "baseline c0000"]


def test_resolve_forms_and_errors(three):
    lineage, _ = three
    sha1 = info_sha(lineage, "c0001")
    assert lineage.resolve("best") == "c0002" and lineage.resolve("baseline") == "c0000"
    assert lineage.resolve("best^") == "c0001" and lineage.resolve("c0002~2") == "c0000"
    assert lineage.resolve("c0001") == "c0001" and lineage.resolve(sha1) == "c0001"
    assert lineage.resolve(sha1[:10]) == "c0001" and lineage.resolve("main") == "c0002"
    for bad, words in (("c0009", "unknown candidate"), ("c0000^", "no parent"), ("nonsense", "names no candidate"),
                       ("--all", "not a candidate")):
        with pytest.raises(UserError, match=words):
            lineage.resolve(bad)
    foreign = subprocess.run(["git", f"--git-dir={lineage.path}", "commit-tree", "-m", "not a candidate",
                              f"{sha1}^{{tree}}"], capture_output=True, text=True, check=True).stdout.strip()
    with pytest.raises(UserError, match="not a candidate"):
        lineage.resolve(foreign)


def test_no_best_yet(tmp_path):
    lineage = Lineage.init(tmp_path / "l")
    lineage.commit(write_candidate(tmp_path / "s", "x\n"), parent=None, result=result(), model="m", rationale="")
    assert lineage.best is None and lineage.main is None
    with pytest.raises(UserError, match="no best"):
        lineage.resolve("best")
    lineage.commit(tmp_path / "s", parent="c0000", result=result("crash"), model="m", rationale="")
    with pytest.raises(UserError, match="only a correct candidate"):
        lineage.accept("c0001")
    assert lineage.best is None and lineage.info("c0001").accepted is False


def test_diff_excludes_record_and_follows_revisions(three):
    lineage, _ = three
    text = lineage.diff("baseline", "best")
    assert "-BLOCK_M = 64" in text and "+BLOCK_M = 128" in text and "+NUM_STAGES = 3" in text
    assert "deleted file mode" in text and "sub/helper.cu" in text and "avo.json" not in text
    stat = lineage.diff("best^", "best", stat=True)
    assert "kernel.py" in stat and "sub/helper.cu" in stat and "changed" in stat and "@@" not in stat
    assert lineage.diff("c0002", "c0002") == ""


def test_checkout_makes_dest_exactly_the_candidate(three, tmp_path):
    lineage, _ = three
    dest = write_candidate(tmp_path / "ws", "junk\n", {"stale/file.txt": "x", "notes.tmp": "y"})
    lineage.checkout("c0000", dest)
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == [
        "kernel.py", "sub/helper.cu"]
    assert (dest / "kernel.py").read_text() == "BLOCK_M = 64\n"
    assert content_hash(dest) == lineage.record("c0000")["content_hash"]


def test_find_duplicate_uses_content_not_caches(three, tmp_path):
    lineage, src = three
    assert lineage.find_duplicate(src) == "c0002"
    (src / "__pycache__").mkdir()
    (src / "__pycache__" / "kernel.cpython-311.pyc").write_bytes(b"\0")
    assert lineage.find_duplicate(src) == "c0002"
    (src / "kernel.py").write_text("BLOCK_M = 256\n")
    assert lineage.find_duplicate(src) is None
    copy = tmp_path / "copy"
    lineage.checkout("c0001", copy)
    assert Lineage.open(lineage.path).find_duplicate(copy) == "c0001"


def test_rollback_keeps_everything_reachable(three, tmp_path):
    lineage, _ = three
    lineage.rollback("baseline")
    assert lineage.main == "c0000" and lineage.best == "c0002" and len(lineage) == 3
    unreachable = git(lineage, "fsck", "--unreachable", "--no-reflogs")
    assert "commit" not in unreachable
    lineage.rollback("c0002")
    assert lineage.main == "c0002"


def test_stale_ref_locks_from_a_killed_writer_are_cleared(three):
    lineage, src = three
    for name in ("refs/avo/c0003.lock", "refs/heads/main.lock", "packed-refs.lock"):
        (lineage.path / name).write_text("")
    reopened = Lineage.open(lineage.path)
    write_candidate(src, "BLOCK_M = 32\n")
    assert reopened.commit(src, parent="c0002", result=result(fitness=1.1), model="m", rationale="") == "c0003"
    reopened.accept("c0003")
    assert reopened.main == "c0003"


def test_parse_message_round_trip():
    summary, rationale, trailers = parse_message(
        "c0004: correct, fitness 1.1x\n\nwhy: because\n\nsecond\n\nAvo-Candidate: c0004\nAvo-Parent: none\n")
    assert summary == "correct, fitness 1.1x" and rationale == "why: because\n\nsecond"
    assert trailers == {"Avo-Candidate": "c0004", "Avo-Parent": "none"}


def test_not_a_lineage(tmp_path):
    with pytest.raises(UserError, match="not a lineage"):
        Lineage.open(tmp_path)


STATUSES = ["correct", "correct", "incorrect", "crash", "rejected", "timeout", "compile_error"]


class LineageMachine(RuleBasedStateMachine):
    """Random commits, accepts, rollbacks, baselines and reopenings against a plain model of what must hold."""

    def __init__(self):
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="avo-lineage-"))
        self.lineage = Lineage.init(self.tmp / "lineage")
        self.model: dict[str, dict] = {}
        self.accepted: set[str] = set()
        self.main = self.best = self.baseline = None

    def pick(self, index: int) -> str:
        return sorted(self.model)[index % len(self.model)]

    @rule(variant=st.integers(0, 4), status=st.sampled_from(STATUSES), fitness=st.floats(0.1, 3.0),
          parent=st.one_of(st.none(), st.integers(0, 100)), two_files=st.booleans())
    def commit(self, variant, status, fitness, parent, two_files):
        src = write_candidate(self.tmp / "src", f"V = {variant}\n", {"lib.cu": "//\n"} if two_files else None)
        key = (variant, two_files)
        first_same = next((cid for cid, m in sorted(self.model.items()) if m["key"] == key), None)
        assert self.lineage.find_duplicate(src) == first_same
        parent_cid = None if parent is None or not self.model else self.pick(parent)
        fitness = fitness if status == "correct" else 0.0
        cid = self.lineage.commit(src, parent=parent_cid, result=result(status, fitness), model="m", rationale="r")
        assert cid == f"c{len(self.model):04d}"
        self.model[cid] = {"parent": parent_cid, "status": status, "fitness": fitness, "key": key}

    @precondition(lambda self: self.model)
    @rule(index=st.integers(0, 100))
    def accept(self, index):
        cid = self.pick(index)
        if self.model[cid]["status"] != "correct":
            with pytest.raises(UserError):
                self.lineage.accept(cid)
            return
        self.lineage.accept(cid)
        self.accepted.add(cid)
        self.main = self.best = cid

    @precondition(lambda self: self.model)
    @rule(index=st.integers(0, 100))
    def rollback(self, index):
        cid = self.pick(index)
        self.lineage.rollback(cid)
        self.main = cid

    @precondition(lambda self: self.model)
    @rule(index=st.integers(0, 100))
    def tag_baseline(self, index):
        cid = self.pick(index)
        self.lineage.tag_baseline(cid)
        self.baseline = cid
        self.main = self.main or cid

    @rule()
    def reopen(self):
        self.lineage.close()
        self.lineage = Lineage.open(self.tmp / "lineage")

    @invariant()
    def matches_model(self):
        lineage = self.lineage
        assert len(lineage) == len(self.model)
        infos = {i.cid: i for i in lineage.log()}
        assert set(infos) == set(self.model)
        for cid, expected in self.model.items():
            info = infos[cid]
            assert (info.parent, info.status, info.fitness) == (expected["parent"], expected["status"],
                                                                expected["fitness"])
            assert info.accepted == (cid in self.accepted)
            assert lineage.ref_sha(f"refs/avo/{cid}") == info.sha
        assert (lineage.main, lineage.best, lineage.baseline) == (self.main, self.best, self.baseline)
        if lineage.best is not None:
            best = infos[lineage.best]
            assert best.accepted and best.status == "correct"
        assert [i.cid for i in lineage.log(limit=3)] == sorted(self.model, reverse=True)[:3]

    def teardown(self):
        self.lineage.close()
        assert not fsck_problems(self.tmp / "lineage")
        shutil.rmtree(self.tmp, ignore_errors=True)


LineageMachine.TestCase.settings = settings(max_examples=12, stateful_step_count=14, deadline=None,
                                            suppress_health_check=[HealthCheck.too_slow])
test_lineage_invariants = LineageMachine.TestCase
