"""avo.extras: which CUDA extra fits torch's CUDA, what CuPy and cuda-bindings are installed, read without a GPU."""

from __future__ import annotations

import sys
from pathlib import Path

import needs
import pytest

from avo import extras

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


@pytest.fixture
def optional() -> dict[str, list[str]]:
    """pyproject.toml's extras."""
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")
    return tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]


def fake_dist(folder: Path, name: str, version: str) -> None:
    info = folder / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


@pytest.mark.parametrize("major", sorted(extras.CUDA_EXTRAS))
def test_each_cuda_extra_pins_cupy_and_cuda_bindings_of_its_major(optional, major):
    requirements = optional[extras.CUDA_EXTRAS[major]]
    assert any(r.startswith(f"cupy-cuda{major}x") for r in requirements)
    assert f"cuda-bindings>={major},<{major + 1}" in requirements
    assert not any(r.startswith("cupy-cuda") and not r.startswith(f"cupy-cuda{major}x") for r in requirements)


def test_the_old_cuda_extra_is_cuda12(optional):
    assert optional["cuda"] == optional["cuda12"]


def test_the_install_command_lists_the_extras_packages():
    command = extras.install_command("cuda13")
    if extras.extra_requirements("cuda13"):  # avo installed with this pyproject's metadata
        assert command == "pip install " + " ".join(f"'{r}'" for r in extras.extra_requirements("cuda13"))
        assert "cupy-cuda13x" in command and "cuda-bindings" in command
    else:
        assert command == "pip install -e '.[cuda13]' in avo's checkout"


@pytest.mark.parametrize("cuda,extra,why", [(13, "cuda13", "torch is built for CUDA 13"),
                                            (12, "cuda12", "torch is built for CUDA 12"),
                                            (None, "cuda13", "torch is a CPU build; cuda12 for CUDA 12"),
                                            (11, "cuda13", "torch is built for CUDA 11, which avo has no extra")])
def test_the_suggested_extra_follows_torchs_cuda(monkeypatch, cuda, extra, why):
    monkeypatch.setattr(extras, "torch_cuda", lambda: cuda)
    suggested, reason = extras.suggested_extra()
    assert suggested == extra and reason.startswith(why)


def test_cupy_installs_are_told_apart_by_distribution_name(tmp_path, monkeypatch):
    fake_dist(tmp_path, "cupy-cuda12x", "13.6.0")
    fake_dist(tmp_path, "cuda-bindings", "12.9.4")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert extras.cupy_installs() == [extras.Installed("cupy-cuda12x", "13.6.0", 12)]
    assert extras.cuda_bindings() == extras.Installed("cuda-bindings", "12.9.4", 12)
    fake_dist(tmp_path, "cupy-cuda13x", "14.2.0")
    assert [c.cuda for c in extras.cupy_installs()] == [12, 13]


def test_nothing_installed_is_nothing_found(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert extras.cupy_installs() == [] and extras.cuda_bindings() is None


def test_the_installed_cupy_is_built_for_the_cuda_its_name_says():
    cupy = needs.module("cupy")
    wheels = [c for c in extras.cupy_installs() if c.name != "cupy"]
    if len(wheels) != 1:
        pytest.skip(f"{len(wheels)} CuPy wheels installed (`avo doctor` says what to do)")
    assert wheels[0].cuda == cupy.cuda.runtime.runtimeGetVersion() // 1000


def test_cuda_bindings_has_the_tensor_map_encoder():
    needs.module("cuda.bindings")
    from cuda.bindings import driver

    assert callable(driver.cuTensorMapEncodeTiled)
