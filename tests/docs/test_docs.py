"""The docs corpus and its index: retrieval quality, chunking, caching and the user index (the agent tools are
tested in tests/agent/tools)."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import pytest

from avo.docs import library as docs
from avo.docs.chunks import chunk_html, chunk_markdown, chunk_text
from avo.errors import UserError

# Questions as an engineer would ask them, each with the section that answers it.
QUESTIONS = [
    ("how much shared memory can a single CTA allocate on an H100?",
     "hopper#shared-memory-per-sm-and-per-block"),
    ("what's the max number of registers per thread, and how many does an SM have on Hopper?",
     "hopper#registers-threads-and-occupancy-limits-per-sm"),
    ("which PTX target do I need to compile warpgroup MMA instructions?",
     "hopper#wgmma-and-the-sm_90a-target"),
    ("my TMA pipeline hangs waiting on the barrier phase, how does expect_tx work?",
     "hopper#mbarrier-arrival-counts-transaction-bytes-and-phases"),
    ("give the producer warpgroup fewer registers so the consumers get more",
     "hopper#setmaxnreg-moving-registers-between-warpgroups"),
    ("where does the accumulator live on B200 and how do I allocate it?",
     "blackwell#tensor-memory-tmem"),
    ("two SMs cooperating on one 256-row MMA on Blackwell",
     "blackwell#2-cta-mma-cta-pairs"),
    ("work stealing for persistent kernels when other kernels occupy some SMs on Blackwell",
     "blackwell#cluster-launch-control-dynamic-persistent-scheduling"),
    ("which SASS opcode is tcgen05.mma, and what are LDTM and STTM in an sm_100a listing?",
     "blackwell#reading-an-sm_100a-compile-report-sass-names-of-tcgen05"),
    ("multicast a TMA load to several CTAs of a cluster on B200",
     "blackwell#tma-multicast-on-b200"),
    ("how many pipeline stages can I use before Triton runs out of shared memory?",
     "triton#num_stages"),
    ("Triton kernel gives wrong results for a bfloat16 matmul when run with TRITON_INTERPRET",
     "triton#the-interpreter-triton_interpret1"),
    ("does Triton emit wgmma for tl.dot on H100, and how do I check the generated PTX?",
     "triton#what-the-compiler-does-with-tldot"),
    ("why multiply the softmax scale by log2(e)?",
     "attention#exp2-with-a-folded-scale"),
    ("skip fully masked key blocks above the diagonal in causal attention",
     "attention#causal-masking-block-skipping-and-the-maskedunmasked-split"),
    ("which kv head does query head h read with grouped query attention?",
     "attention#gqa-and-mqa-head-mapping"),
    ("overlap the softmax of one warpgroup with the GEMM of another on Hopper",
     "attention#fa3-hopper-warp-specialization-and-ping-pong"),
    ("avoid rescaling the output accumulator every iteration when the running max barely changes",
     "attention#fa4-blackwell-ideas"),
    ("improve L2 reuse by changing the order in which programs pick output tiles",
     "gemm#grouped-and-swizzled-tile-order"),
    ("the last wave only partly fills the GPU; divide the k-loop iterations evenly across SMs",
     "gemm#stream-k"),
    ("what does a long scoreboard stall mean and how do I fix it?",
     "ncu#long_scoreboard"),
    ("why is my kernel slower under ncu than when I time it myself?",
     "ncu#profiling-conditions-clocks-and-caches"),
]


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    return docs.Library(cache=tmp_path_factory.mktemp("cache"))


def test_retrieval_finds_the_expected_section_in_the_top_three(shipped):
    misses = []
    for question, expected in QUESTIONS:
        found = [hit.id for hit in shipped.search(question, 3)]
        if expected not in found:
            misses.append(f"{question!r}: expected {expected}, got {found}")
    print(f"{len(QUESTIONS) - len(misses)}/{len(QUESTIONS)} in the top 3")
    for miss in misses:
        print("miss:", miss)
    assert len(QUESTIONS) == 22
    assert len(QUESTIONS) - len(misses) >= 18, "\n".join(misses)


def test_every_cross_reference_in_the_corpus_resolves(shipped):
    ids = {chunk.id for chunk in shipped.corpus_index().chunks}
    refs = {m.group(0) for path, _ in shipped.corpus_files()
            for m in re.finditer(r"\b[a-z]+#[a-z0-9_-]+", path.read_text())}
    assert refs, "the notes should point at each other"
    assert sorted(refs - ids) == []


def test_the_shipped_corpus_covers_the_required_topics(shipped):
    keys = {key for _, key in shipped.corpus_files()}
    assert {"hopper", "blackwell", "ptx", "triton", "attention", "gemm", "ncu"} <= keys
    for path, _ in shipped.corpus_files():
        assert path.read_text().count("Source") >= 5, f"{path.name} should name its sources"


def test_read_returns_a_section_with_its_subsections(shipped):
    section = shipped.read("hopper#tma-and-mbarrier")
    assert section.ids[0] == "hopper#tma-and-mbarrier"
    assert "hopper#mbarrier-arrival-counts-transaction-bytes-and-phases" in section.ids
    assert "expect_tx" in section.text
    whole = shipped.read("hopper")
    assert len(whole.ids) > 5 and whole.text.startswith("# Hopper")


def test_read_accepts_a_file_suffix_or_a_bare_heading_slug(shipped):
    assert shipped.read("hopper.md#tma-and-mbarrier").id == "hopper#tma-and-mbarrier"
    assert shipped.read("stream-k").id == "gemm#stream-k"
    with pytest.raises(UserError, match="did you mean"):
        shipped.read("hopper#tma-and-mbarier")


def test_markdown_chunks_by_heading_and_ignores_hashes_in_code():
    text = "# Title\n\nintro\n\n## First part\n\none\n\n```\n# a comment, not a heading\n```\n\n### Detail\n\n" \
           "two\n\n## First part\n\nthree\n"
    chunks = chunk_markdown(text, "notes", "notes.md")
    assert [c.id for c in chunks] == ["notes", "notes#first-part", "notes#detail", "notes#first-part-2"]
    assert [c.level for c in chunks] == [1, 2, 3, 2]
    assert "# a comment" in chunks[1].text
    assert chunks[2].title == "Title > First part > Detail"


def test_html_chunks_by_h1_to_h3_and_drops_scripts_and_navigation():
    html = """<html><head><title>CUDA Guide</title><style>p {color: red}</style></head><body>
    <nav><a href="#">Home</a> navigation junk</nav>
    <h1>Programming Guide<a class="headerlink" href="#x">¶</a></h1><p>Intro &amp; overview.</p>
    <section id="s"><h2>3.2 Shared Memory</h2><p>Banks are 4&nbsp;bytes wide &lt;always&gt;.</p>
    <script>var secret = 1;</script><h3>Bank conflicts</h3><ul><li>one</li><li>two</li></ul>
    <h4>Deeper</h4><p>stays in h3</p></section></body></html>"""
    chunks = chunk_html(html, "guide", "guide.html")
    assert [c.id for c in chunks] == ["guide", "guide#32-shared-memory", "guide#bank-conflicts"]
    assert chunks[0].heading == "Programming Guide"
    assert "Intro & overview." in chunks[0].text
    assert "<always>" in chunks[1].text
    joined = " ".join(c.text for c in chunks)
    assert "secret" not in joined and "navigation junk" not in joined and "color" not in joined
    assert "one\ntwo" in chunks[2].text and "stays in h3" in chunks[2].text


def test_plain_text_is_cut_into_parts():
    text = "\n\n".join(f"paragraph {n} " + "word " * 60 for n in range(20))
    chunks = chunk_text(text, "log", "log.txt")
    assert chunks[0].id == "log" and len(chunks) > 3
    assert all(c.id == f"log#part-{n}" for n, c in enumerate(chunks[1:], 2))


def _corpus(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "alpha.md").write_text("# Alpha\n\n## Swizzle\n\nThe swizzle spreads rows over banks.\n")
    (corpus / "beta.md").write_text("# Beta\n\n## Pipelines\n\nStages overlap loads with math.\n")
    return corpus


def test_the_index_is_cached_and_rebuilt_when_a_file_changes(tmp_path):
    corpus, cache = _corpus(tmp_path), tmp_path / "cache"
    assert not docs.Library(corpus, cache).corpus_index().from_cache
    assert docs.Library(corpus, cache).corpus_index().from_cache

    library = docs.Library(corpus, cache)
    assert library.corpus_index().from_cache
    (corpus / "beta.md").write_text("# Beta\n\n## Pipelines\n\nStages overlap loads with mbarriers.\n")
    rebuilt = library.corpus_index()  # same process: the size/mtime change is noticed
    assert not rebuilt.from_cache
    assert library.search("mbarriers", 1)[0].id == "beta#pipelines"

    # Same size and mtime, different bytes: only the content hash tells.
    path = corpus / "alpha.md"
    stat = path.stat()
    path.write_text(path.read_text().replace("banks", "BANKS"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert not docs.Library(corpus, cache).corpus_index().from_cache

    (corpus / "gamma.md").write_text("# Gamma\n\nA new file.\n")
    assert not docs.Library(corpus, cache).corpus_index().from_cache


def test_an_unwritable_cache_still_searches(tmp_path, caplog):
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder should be")
    with caplog.at_level(logging.WARNING, logger="avo.docs"):
        hits = docs.Library(_corpus(tmp_path), blocker).search("swizzle banks", 2)
    assert hits[0].id == "alpha#swizzle"
    assert any("could not cache" in r.getMessage() for r in caplog.records)


def _user_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "mydocs"
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.md").write_text("# Notes\n\n## Persistent matmul\n\nZebrafish tiles loop over the grid.\n")
    (folder / "sub" / "guide.html").write_text("<h1>Guide</h1><h2>Quokka barrier</h2><p>Quokka text.</p>")
    (folder / "plain.txt").write_text("Wombat scheduling notes.\n")
    (folder / "blob.md").write_bytes(b"# looks like markdown\x00\x01\x02 but is binary")
    (folder / "latin.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (folder / "broken.md").symlink_to(folder / "missing-target.md")
    locked = folder / "locked.md"
    locked.write_text("# Locked\n\nOcelot secret.\n")
    locked.chmod(0)
    (folder / "picture.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00")
    return folder


def test_user_index_skips_unreadable_and_binary_files_with_a_warning(tmp_path, caplog):
    library = docs.Library(_corpus(tmp_path), tmp_path / "cache")
    folder = _user_folder(tmp_path)
    with caplog.at_level(logging.WARNING, logger="avo.docs"):
        index = library.add([str(folder)])
    skipped = {Path(path).name: reason for path, reason in index.skipped}
    assert "binary" in skipped["blob.md"]
    assert "UTF-8" in skipped["latin.txt"]
    assert "broken.md" in skipped
    root = os.geteuid() == 0  # root reads a chmod 000 file anyway
    assert ("locked.md" in skipped) != root
    assert "picture.png" not in skipped  # other file types in a folder are not documents: ignored quietly
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "blob.md" in warned and "latin.txt" in warned and "broken.md" in warned

    assert library.search("zebrafish", 1)[0].id == "mydocs/notes#persistent-matmul"
    assert library.search("quokka", 1)[0].id == "mydocs/sub/guide#quokka-barrier"
    assert library.search("wombat", 1)[0].id == "mydocs/plain"
    assert library.search("swizzle", 1)[0].id == "alpha#swizzle"  # the shipped corpus is still searched
    assert "mydocs/notes#persistent-matmul" in library.listing()[str(folder / "notes.md")]

    again = docs.Library(library.corpus, library.cache).user_index()
    assert again.from_cache and {Path(p).name for p, _ in again.skipped} >= {"blob.md", "latin.txt"}


def test_user_index_accumulates_resets_and_avoids_shipped_ids(tmp_path):
    library = docs.Library(_corpus(tmp_path), tmp_path / "cache")
    own = tmp_path / "alpha.md"
    own.write_text("# Mine\n\nPlatypus notes.\n")
    library.add([str(own)])
    assert library.search("platypus", 1)[0].id == "user/alpha"
    other = tmp_path / "other.txt"
    other.write_text("Echidna notes.\n")
    library.add([str(other)])
    assert library.search("platypus", 1) and library.search("echidna", 1)
    assert library.add([], reset=True) is None
    assert library.search("platypus", 1) == []
    with pytest.raises(UserError, match="no such file"):
        library.add([str(tmp_path / "nowhere")])
