"""The docs the agent reads: notes chunked by heading, indexed with BM25 (bm25s), searched and read by id.

- `library.py`: the shipped corpus (docs_corpus/) and the user's own documents; search, read, list, index.
- `index.py`: one BM25 index: tokenizing and stemming, file stamps, the cache on disk.
- `chunks.py`: Markdown, HTML and text files cut into sections by heading.
"""
