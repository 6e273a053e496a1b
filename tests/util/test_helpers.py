"""The small shared helpers: atomic replacement, the cache folder, number formats."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from avo.util.atomic import replacing, write_text_atomic
from avo.util.cache import cache_root
from avo.util.format import finite, number


def test_a_write_that_fails_leaves_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "run.json"
    write_text_atomic(target, "old")
    with pytest.raises(RuntimeError):
        with replacing(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["run.json"]
    write_text_atomic(target, "new", tmp_dir=tmp_path)
    assert target.read_text() == "new"


def test_the_cache_folder_follows_the_variables_and_expands_the_home(monkeypatch, tmp_path):
    monkeypatch.setenv("AVO_CACHE_DIR", str(tmp_path / "c"))
    assert cache_root() == tmp_path / "c"
    monkeypatch.delenv("AVO_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "~/xdg")
    assert cache_root() == Path.home() / "xdg" / "avo"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_root() == Path.home() / ".cache" / "avo"


def test_numbers_and_missing_ones():
    assert number(None) == "-" and number(1.23456) == "1.235" and number(2, ".3f") == "2.000"
    assert number(None, "9.4f", none=f"{'-':>9}") == "        -"
    assert finite(math.nan, ".3f") == "-" and finite(math.inf) == "inf" and finite(0.5, ".2e") == "5.00e-01"
