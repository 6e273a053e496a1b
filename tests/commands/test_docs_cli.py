"""`avo docs search | show | index | list` through the real CLI entry point."""

from __future__ import annotations

import json

import pytest

from avo.cli import main


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AVO_CACHE_DIR", str(tmp_path / "cache"))


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_search_prints_ranked_ids_titles_and_snippets(capsys):
    code, out, _ = run(capsys, "docs", "search", "tensor memory allocation on Blackwell", "-k", "2")
    assert code == 0
    assert out.startswith("1. blackwell#tensor-memory-tmem")
    assert "2. " in out and "3. " not in out


def test_search_json(capsys):
    code, out, _ = run(capsys, "docs", "search", "stream-k wave quantization", "--json")
    hits = json.loads(out)
    assert code == 0 and len(hits) == 5
    assert {"id", "title", "snippet", "score", "source"} <= set(hits[0])
    assert hits == sorted(hits, key=lambda h: -h["score"])


def test_show_prints_a_section(capsys):
    code, out, _ = run(capsys, "docs", "show", "gemm#stream-k")
    assert code == 0 and "## Stream-K" in out and "2301.03598" in out


@pytest.mark.parametrize("argv, message", [
    (("docs", "show", "gemm#no-such-thing"), "unknown docs id"),
    (("docs", "search", "   "), "query is empty"),
    (("docs", "search", "tma", "-k", "0"), "-k must be at least 1"),
    (("docs", "index"), "name at least one file or folder"),
    (("docs", "index", "/nonexistent/path/for/docs"), "no such file or folder"),
])
def test_bad_input_is_one_line_and_exit_code_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_index_a_folder_then_search_list_and_reset(capsys, tmp_path):
    folder = tmp_path / "cuda-docs"
    folder.mkdir()
    (folder / "guide.html").write_text("<title>Guide</title><h1>Guide</h1><h2>Narwhal memory</h2><p>Narwhal.</p>")
    (folder / "raw.md").write_bytes(b"\x00\x01 binary")
    code, out, err = run(capsys, "docs", "index", str(folder))
    assert code == 0
    assert "user index: 1 files" in out and "1 skipped" in out
    assert "avo: warning: skipped" in err and "raw.md" in err and "binary" in err

    code, out, _ = run(capsys, "docs", "search", "narwhal", "-k", "1")
    assert code == 0 and out.startswith("1. cuda-docs/guide#narwhal-memory")

    code, out, _ = run(capsys, "docs", "list")
    assert code == 0 and "  hopper#tma-and-mbarrier" in out and "  cuda-docs/guide#narwhal-memory" in out

    code, out, _ = run(capsys, "docs", "index", "--reset")
    assert code == 0 and "user index is empty" in out
    code, out, _ = run(capsys, "docs", "search", "narwhal", "--json")
    assert json.loads(out) == []


def test_a_damaged_list_of_indexed_documents_is_an_error_not_an_empty_index(capsys, tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "narwhal.md").write_text("# Narwhal\n\nNarwhal memory.\n")
    assert run(capsys, "docs", "index", str(folder))[0] == 0
    (tmp_path / "cache" / "docs" / "user-sources.json").write_text('{"paths": ["/x", ')
    code, out, err = run(capsys, "docs", "search", "narwhal")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "user-sources.json is damaged" in err and "avo docs index --reset" in err
    assert run(capsys, "docs", "index", "--reset", str(folder))[0] == 0
    code, out, _ = run(capsys, "docs", "search", "narwhal", "-k", "1")
    assert code == 0 and out.startswith("1. notes/narwhal")
