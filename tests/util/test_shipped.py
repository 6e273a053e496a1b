"""The folders avo ships beside its package (the seed kernels, the docs corpus): pyproject's data-files name every
file in them, a wheel built from the checkout carries them under share/avo/, and an installed avo, with no checkout
beside its package, finds its copies there: the default seeds `avo evolve` starts from and the docs corpus."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from test_install import ROOT, pyproject

from avo.docs.library import corpus_dir
from avo.tasks import load
from avo.util import shipped

SHIPPED = ("kernels", "docs_corpus")


def files_in(folder: Path) -> set[str]:
    """Every file under `folder` (bytecode caches aside), as paths relative to the checkout."""
    return {p.relative_to(ROOT).as_posix() for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def test_the_data_files_name_every_shipped_file_under_its_own_path():
    named = set()
    for target, patterns in pyproject()["tool"]["setuptools"]["data-files"].items():
        for pattern in patterns:
            found = [p.relative_to(ROOT).as_posix() for p in ROOT.glob(pattern)]
            assert found, f"{pattern} matches nothing"
            assert all(target == "share/avo/" + f.rsplit("/", 1)[0] for f in found), (target, pattern)
            named.update(found)
    assert named == set().union(*(files_in(ROOT / name) for name in SHIPPED))


def test_an_installed_avo_finds_the_copies_under_its_prefix(tmp_path, monkeypatch):
    prefix, elsewhere = tmp_path / "env", tmp_path / "site-packages"
    seed = prefix / "share" / "avo" / "kernels" / "gemm" / "triton_tiled"
    seed.mkdir(parents=True)
    (prefix / "share" / "avo" / "docs_corpus").mkdir()
    (elsewhere / "kernels").mkdir(parents=True)  # another distribution's package of that name
    monkeypatch.setattr(shipped, "CHECKOUT", elsewhere)  # the package in site-packages, not in a checkout
    monkeypatch.setattr(shipped.sys, "prefix", str(prefix))
    monkeypatch.setattr(shipped.sysconfig, "get_path", lambda name: str(tmp_path / "nowhere"))
    assert Path(load("gemm").default_seed()) == seed
    assert corpus_dir() == prefix / "share" / "avo" / "docs_corpus"
    assert shipped.shipped_dir("none") == elsewhere / "none"  # no copy: where it was looked for first


def test_a_wheel_built_from_the_checkout_carries_every_seed_and_the_docs(tmp_path):
    source = tmp_path / "src"  # a copy: pip builds in the source tree
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("avo", *SHIPPED):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "--no-index", str(source), "-w", str(tmp_path / "dist")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    [wheel] = (tmp_path / "dist").glob("avo-*.whl")
    data = {n.split("/data/share/avo/", 1)[1] for n in zipfile.ZipFile(wheel).namelist() if "/data/share/avo/" in n}
    assert data == {f for name in SHIPPED for f in files_in(ROOT / name)}
