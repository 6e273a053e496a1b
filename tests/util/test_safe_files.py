"""avo.util.safe_files: regular files only, nothing followed, nothing truncated through a link."""

from __future__ import annotations

import os

import pytest

from avo.util import safe_files
from avo.util.safe_files import UnsafeFile


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "folder"
    (root / "sub").mkdir(parents=True)
    (root / "kernel.py").write_text("x = 1\n")
    (root / "sub" / "run.sh").write_text("#!/bin/sh\n")
    (root / "sub" / "run.sh").chmod(0o755)
    return root


def test_writing_through_a_hard_link_leaves_its_target_whole(folder, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    os.link(outside, folder / "linked.txt")
    with pytest.raises(UnsafeFile, match="linked.txt is a hard link"):
        safe_files.write_bytes(folder, "linked.txt", b"")
    assert outside.read_text() == "keep me\n"


def test_no_folder_on_the_way_is_followed(folder, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (folder / "hop").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafeFile, match="hop is a symlink"):
        safe_files.write_bytes(folder, "hop/new.txt", b"x")
    with pytest.raises(UnsafeFile, match="hop is a symlink"):
        safe_files.read_bytes(folder, "hop/new.txt")
    assert not (tmp_path / "elsewhere" / "new.txt").exists()
    files, refused = safe_files.scan(folder)
    assert [rel for rel, _ in files] == ["kernel.py", "sub/run.sh"]
    assert [(r.rel, r.what) for r in refused] == [("hop", "a symlink")]


def test_copy_keeps_executable_bits_and_removal_takes_only_the_name(folder, tmp_path):
    dest = tmp_path / "copy"
    safe_files.copy_tree(folder, dest)
    assert (dest / "kernel.py").read_text() == "x = 1\n" and os.access(dest / "sub" / "run.sh", os.X_OK)
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    os.link(outside, folder / "linked.txt")
    with pytest.raises(UnsafeFile):
        safe_files.copy_tree(folder, tmp_path / "second")
    assert not (tmp_path / "second").exists()  # refused before anything was written
    safe_files.remove(folder, "linked.txt")
    assert outside.read_text() == "keep me\n" and os.stat(outside).st_nlink == 1


def test_read_is_bounded_and_paths_stay_inside(folder):
    (folder / "big.bin").write_bytes(b"a" * 1000)
    data, st = safe_files.read_file(folder, "big.bin", limit=10)
    assert len(data) == 11 and st.st_size == 1000
    for rel in ("../kernel.py", "/etc/passwd", "."):
        with pytest.raises(ValueError):
            safe_files.read_bytes(folder, rel)
