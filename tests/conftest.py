"""Shared test set-up: tests marked `gpu` skip cleanly on machines without an NVIDIA GPU; `private_cache` gives a
module a cache of its own (`pytestmark = pytest.mark.usefixtures("private_cache")`); with AVO_TEST_FAILURES=FILE
each failure's report is appended to FILE as it happens (a run on a lent GPU may be cut by its time limit before
pytest prints its summary)."""

from __future__ import annotations

import os

import pytest


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
