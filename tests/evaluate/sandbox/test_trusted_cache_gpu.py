"""On a GPU: the trusted builds are Triton's driver stub and the warm-up kernel (and, before Triton 3.9, its
launcher), and a sandboxed worker seeded with them sets up without building them again (Triton replaces a cache file
it rebuilds, so every seeded file keeps its inode). For attention they hold the kernels the driver compiled from
cuDNN's PTX in the set-up, and a seeded worker's set-up compiles none of them again (its driver cache gains no
file)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from avo.config import EvalConfig
from avo.evaluate import sandbox, trusted_cache
from avo.evaluate.harness import Evaluator, scrubbed_env
from avo.evaluate.worker_process import WorkerProcess
from avo.util import safe_files
import needs

pytestmark = [pytest.mark.gpu, needs.bwrap]


def seeded_worker(task: str, tmp_path, monkeypatch) -> tuple[WorkerProcess, Path]:
    """A sandboxed worker of `task`, seeded from a trusted copy of the test's own (made first), and that copy."""
    from avo.gpus import resolve

    monkeypatch.setenv("AVO_CACHE_DIR", str(tmp_path / "avo-cache"))
    monkeypatch.delenv(trusted_cache.ENV_VAR, raising=False)  # its own trusted copy, not the suite's shared one
    evaluator = Evaluator(task, device="cuda", gpu=resolve("auto", "cuda"), config=EvalConfig(sandbox="on"))
    setup, env = evaluator.setup(), scrubbed_env("cuda")
    worker = WorkerProcess(setup, env, wrap=sandbox.command)
    return worker, trusted_cache.folder(trusted_cache.key(setup, env))


def test_a_seeded_worker_sets_up_without_rebuilding_the_driver_stub_or_the_warm_up_kernel(tmp_path, monkeypatch):
    worker, trusted = seeded_worker("gemm", tmp_path, monkeypatch)
    try:
        names = [rel.rsplit("/", 1)[-1] for rel, _ in safe_files.regular_files(trusted)]
        assert any(name.startswith("cuda_utils") for name in names), names
        assert any(name.startswith("_add_one") and name.endswith(".cubin") for name in names), names
        cache = worker.path / "cache"
        seeded = {rel: os.stat(cache / rel).st_ino for rel, _ in safe_files.regular_files(cache)}
        assert worker.ready(300), worker.stderr_tail(3000)
        after = {rel: os.stat(cache / rel).st_ino for rel, _ in safe_files.regular_files(cache)}
        assert {rel: after.get(rel) for rel in seeded} == seeded  # nothing rebuilt
        assert not [rel for rel in after if rel not in seeded and rel.endswith(".so")]  # no stub or launcher built
    finally:
        worker.discard()


def test_a_seeded_attention_worker_finds_the_librarys_jit_compiled_kernels_in_its_driver_cache(tmp_path, monkeypatch):
    worker, trusted = seeded_worker("attention", tmp_path, monkeypatch)
    try:
        jitted = [rel for rel, _ in safe_files.regular_files(trusted) if rel.startswith("cuda/")]
        assert len(jitted) > 1, jitted  # the index and the kernels cuDNN had the driver compile
        driver_cache = worker.path / "cache" / "cuda"
        seeded = {rel for rel, _ in safe_files.regular_files(driver_cache)}
        assert worker.ready(300), worker.stderr_tail(3000)
        added = {rel for rel, _ in safe_files.regular_files(driver_cache)} - seeded
        assert not added, f"the seeded worker's set-up compiled {len(added)} kernels its copy did not hold"
    finally:
        worker.discard()
