"""Shared test set-up: tests marked `gpu` skip cleanly on machines without an NVIDIA GPU; `private_cache` gives a
module a cache of its own (`pytestmark = pytest.mark.usefixtures("private_cache")`); with AVO_TEST_FAILURES=FILE
each failure's report is appended to FILE as it happens (a run on a lent GPU may be cut by its time limit before
pytest prints its summary). The sandboxed workers' trusted builds (avo/evaluate/trusted_cache.py) are shared by the
whole session, whose modules otherwise each set a worker up for them in their private cache roots.

On a machine without an NVIDIA GPU, every process of the session, and each one it starts (evaluation workers, `avo`
subprocesses), runs torch's and NumPy's CPU math on one thread unless the caller set otherwise: the tests' tensors
are tiny, and the suite runs two xdist workers on two cores, each starting more processes, so OpenMP and OpenBLAS
thread pools only spun and took the CPUs from each other (tests/evaluate/test_cheats.py: 116 -> 97 CPU-seconds on 2
cores). A GPU machine keeps the defaults its GPU tests have always run with."""

from __future__ import annotations

import os
import shutil
import tempfile

if not os.path.exists("/dev/nvidiactl"):  # no NVIDIA driver here; decided before torch or NumPy loads
    for _threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_threads, "1")

import pytest  # noqa: E402

_TRUSTED = "AVO_TRUSTED_CACHE_DIR"
_shared_trusted: list[str] = []


def pytest_configure(config):
    if not os.environ.get(_TRUSTED):
        _shared_trusted.append(tempfile.mkdtemp(prefix="avo-trusted-caches-"))
        os.environ[_TRUSTED] = _shared_trusted[0]


def pytest_unconfigure(config):
    for folder in _shared_trusted:
        os.environ.pop(_TRUSTED, None)
        shutil.rmtree(folder, ignore_errors=True)


def _has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


HAS_GPU = _has_gpu()


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (none found)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_runtest_logreport(report):
    path = os.environ.get("AVO_TEST_FAILURES")
    if path and report.failed:
        with open(path, "a") as out:
            out.write(f"== {report.nodeid} ({report.when})\n{report.longreprtext}\n\n")


@pytest.fixture(scope="module")
def private_cache(tmp_path_factory):
    """KernelBench measurements and first candidates go to a cache of the module's own (evaluation workers inherit
    it through the environment)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AVO_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield
