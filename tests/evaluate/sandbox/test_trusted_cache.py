"""Sandboxed workers start with the trusted builds of a set-up-only worker (avo/evaluate/trusted_cache.py), and what a
candidate writes into its own cache reaches neither the trusted copy nor any other worker.

The task (trusted/problem.py) builds a C module through Triton's build cache during its set-up, as Triton builds its
driver stub, and notes what its cache held first; the candidate (trusted/planter) overwrites its cache from a shell."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from avo.config import EvalConfig
from avo.evaluate import sandbox, trusted_cache
from avo.evaluate.harness import Evaluator, scrubbed_env
from avo.evaluate.worker_process import WorkerProcess
from avo.gpus import PROFILES
from avo.util import safe_files
import needs

PROBE = Path(__file__).parent / "trusted"
BUILT = "avo_trusted_probe"
WAIT_S = 300.0


class Probe:
    """Workers for the probe task, sandboxed as the evaluator sandboxes them, with a cache root of the test's own."""

    def __init__(self, root: Path):
        config = EvalConfig(check_suite="tiny", bench_suite="", seed=3, sandbox="on", import_timeout_s=WAIT_S)
        evaluator = Evaluator(str(PROBE / "problem.py"), device="interpret", gpu=PROFILES["h200"], config=config)
        self.setup, self.env = evaluator.setup(), scrubbed_env("interpret")
        self.wrap = functools.partial(sandbox.command, readable=(PROBE,))
        self.trusted = trusted_cache.folder(trusted_cache.key(self.setup, self.env))
        self.workers: list[WorkerProcess] = []

    def worker(self) -> WorkerProcess:
        self.workers.append(WorkerProcess(self.setup, self.env, wrap=self.wrap))
        return self.workers[-1]

    def close(self) -> None:
        for worker in self.workers:
            worker.discard()


@pytest.fixture(autouse=True)
def own_trusted_copies(monkeypatch):
    """Each test's trusted copies under its own cache root, not the suite's shared folder (tests/conftest.py)."""
    monkeypatch.delenv(trusted_cache.ENV_VAR, raising=False)


@pytest.fixture
def probe(tmp_path, monkeypatch):
    monkeypatch.setenv("AVO_CACHE_DIR", str(tmp_path / "avo-cache"))
    made = Probe(tmp_path)
    yield made
    made.close()


def contents(root: Path) -> dict[str, str]:
    """Every regular file under `root` by relative path, as a digest of its bytes."""
    return {rel: hashlib.sha256(safe_files.read_bytes(root, rel)).hexdigest()
            for rel, _ in safe_files.regular_files(root)} if root.is_dir() else {}


def built_files(root: Path) -> list[str]:
    return [rel for rel in contents(root) if rel.rsplit("/", 1)[-1].startswith(BUILT)]


@needs.bwrap
def test_a_second_sandboxed_worker_finds_the_set_up_builds_in_its_cache_before_it_starts(probe):
    first = probe.worker()  # no trusted copy yet: a set-up-only worker builds it first
    assert built_files(probe.trusted), "the set-up-only worker's build is not in the trusted copy"
    cache = first.path / "cache"
    assert built_files(cache) == built_files(probe.trusted)
    assert first.ready(WAIT_S), first.stderr_tail(2000)
    seen = (first.path / "tmp" / "cache-seen").read_text().split()
    assert any(name.startswith(BUILT) for name in seen), f"the worker's cache held only {seen} when it started"
    rel = built_files(cache)[0]
    own, kept = os.stat(cache / rel), os.stat(probe.trusted / rel)
    assert own.st_ino != kept.st_ino and own.st_nlink == 1  # a copy of its own, not a link to the trusted file


@needs.bwrap
def test_what_a_candidate_writes_into_its_cache_reaches_no_trusted_copy_nor_other_worker(probe, tmp_path):
    attacked, bystander = probe.worker(), probe.worker()
    trusted_before = contents(probe.trusted)
    assert built_files(probe.trusted)
    planter = tmp_path / "planter"
    planter.mkdir()
    source = (PROBE / "planter" / "kernel.py").read_text()
    (planter / "kernel.py").write_text(source.replace("@TRUSTED@", str(probe.trusted))
                                       .replace("@OTHER@", str(bystander.path / "cache" / "triton")))
    attacked.start({"mode": "evaluate", "candidates": [str(planter)]})
    deadline = time.monotonic() + WAIT_S
    while attacked.alive() and time.monotonic() < deadline:
        attacked.poll_channel(0.05)
    results = attacked.channel_results()
    assert isinstance(results, list) and results[0]["status"] == "correct", (results, attacked.stderr_tail(2000))

    own = attacked.path / "cache" / "triton"
    assert (own / "planted.so").read_text() == "planted\n"  # the attack ran: its own cache is its to spoil
    assert all((own / rel).read_text() == "planted\n" for rel in built_files(own))
    assert contents(probe.trusted) == trusted_before
    assert not list(probe.trusted.parent.rglob("planted.so"))
    later = probe.worker()
    for other in (bystander, later):
        cache = other.path / "cache"
        assert contents(cache) == contents(probe.trusted), other.path
        assert not list(cache.rglob("planted.so"))


def test_triton_group_files_are_moved_to_each_box_and_links_are_refused(tmp_path):
    box = tmp_path / "box" / "cache"
    group = {"child_paths": {"k.cubin": str(box / "triton" / "abc" / "k.cubin"), "k.json": "/elsewhere/k.json"}}
    box.mkdir(parents=True)
    safe_files.write_bytes(box, "triton/abc/k.cubin", b"binary")
    safe_files.write_bytes(box, "triton/abc/__grp__k.json", json.dumps(group).encode())
    safe_files.write_bytes(box, "triton/def/__grp__ok.json",
                           json.dumps({"child_paths": {"k.cubin": str(box / "triton" / "abc" / "k.cubin")}}).encode())
    safe_files.write_bytes(box, "triton/abc/tmp.pid_1_x/torn.so", b"half")
    kept = tmp_path / "kept"
    assert trusted_cache.take(box, kept)
    assert sorted(contents(kept)) == ["triton/abc/k.cubin", "triton/def/__grp__ok.json"]  # no member outside, no tmp
    assert json.loads((kept / "triton/def/__grp__ok.json").read_text())["child_paths"] == {
        "k.cubin": "triton/abc/k.cubin"}
    fresh = tmp_path / "fresh" / "cache"
    trusted_cache.seed(kept, fresh)
    moved = json.loads((fresh / "triton/def/__grp__ok.json").read_text())["child_paths"]["k.cubin"]
    assert moved == str(fresh / "triton/abc/k.cubin") and Path(moved).read_bytes() == b"binary"

    (box / "triton" / "link.so").symlink_to(tmp_path / "outside.so")
    assert not trusted_cache.take(box, tmp_path / "refused") and not (tmp_path / "refused").exists()


def test_the_key_follows_the_toolchain_and_not_which_gpu_or_cache_folder(tmp_path):
    setup, env = {"device": "cuda", "gpu": "h200"}, {"PATH": "/usr/bin", "CUDA_VISIBLE_DEVICES": "0"}
    base = trusted_cache.key(setup, env)
    assert trusted_cache.key(setup, {**env, "CUDA_VISIBLE_DEVICES": "3", "TRITON_CACHE_DIR": str(tmp_path),
                                     "CUDA_CACHE_PATH": str(tmp_path / "nv")}) == base
    for changed in ({**env, "CC": "clang"}, {**env, "TRITON_PTXAS_PATH": "/opt/ptxas"}, {**env, "PATH": "/opt/bin"}):
        assert trusted_cache.key(setup, changed) != base
    assert trusted_cache.key({"device": "interpret", "gpu": "h200"}, env) != base
    assert trusted_cache.key({"device": "cuda", "gpu": "b200"}, env) != base


def test_a_build_that_failed_is_not_tried_again_and_a_good_one_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("AVO_CACHE_DIR", str(tmp_path))
    calls = []

    def failing(dest: Path) -> bool:
        calls.append(dest)
        return False

    digest = f"failing-{time.time_ns()}"
    assert trusted_cache.ensure(digest, failing) is None and trusted_cache.ensure(digest, failing) is None
    assert len(calls) == 1 and not trusted_cache.folder(digest).exists()

    def building(dest: Path) -> bool:
        (dest / "made").write_text("x")
        return True

    kept = trusted_cache.ensure("good", building)
    assert kept == trusted_cache.folder("good") and (kept / "made").read_text() == "x"
    assert trusted_cache.ensure("good", failing) == kept and len(calls) == 1
    assert [p.name for p in kept.parent.iterdir()] == ["good"]  # no scratch folder left


def test_a_trusted_copy_holding_a_link_seeds_nothing_and_a_killed_builds_leftovers_are_swept(tmp_path, monkeypatch):
    trusted = tmp_path / "trusted"
    trusted.mkdir()
    safe_files.write_bytes(trusted, "triton/abc/stub.so", b"stub")
    (trusted / "triton" / "abc" / "passwd.so").symlink_to("/etc/passwd")
    cache = tmp_path / "box" / "cache"
    assert not trusted_cache.seed(trusted, cache) and not cache.exists()

    monkeypatch.setenv("AVO_CACHE_DIR", str(tmp_path / "root"))
    left = trusted_cache.folder("x").parent / "avo-building-999999999-dead"  # no such process
    left.mkdir(parents=True)
    assert trusted_cache.ensure("swept", lambda dest: True) is not None and not left.exists()
