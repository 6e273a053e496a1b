"""Loading a candidate's kernel.py: unique modules, errors an agent can act on, entry detection before spawning."""

from __future__ import annotations

from pathlib import Path

import pytest

from avo.evaluate.worker.loader import CandidateLoadError, defines_entry, load_entry

KERNELS = Path(__file__).parents[1] / "kernels"


def write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def test_loads_the_entry_under_a_fresh_module_name_each_time():
    first = load_entry(KERNELS / "good_gemm", "gemm")
    second = load_entry(KERNELS / "good_gemm", "gemm")
    assert first.__name__ == "gemm" and first.__module__ != second.__module__


def test_syntax_error_names_file_line_and_text():
    with pytest.raises(CandidateLoadError) as info:
        load_entry(KERNELS / "syntax_error", "gemm")
    assert info.value.rule == "compile"
    assert "kernel.py:6" in info.value.message and "def gemm(a, b)" in info.value.message


def test_import_error_shows_only_the_candidates_frames(tmp_path):
    folder = write(tmp_path / "c", {"kernel.py": "import helper\n\ndef gemm(a, b):\n    return a\n",
                                    "helper.py": "X = 1\nraise RuntimeError('bad constant')\n"})
    with pytest.raises(CandidateLoadError) as info:
        load_entry(folder, "gemm")
    message = info.value.message
    assert "kernel.py:1" in message and "helper.py:2" in message and "RuntimeError: bad constant" in message
    assert "loader.py" not in message and "importlib" not in message


def test_missing_module_is_a_load_error(tmp_path):
    folder = write(tmp_path / "c", {"kernel.py": "import no_such_module_here\n"})
    with pytest.raises(CandidateLoadError, match="No module named 'no_such_module_here'"):
        load_entry(folder, "gemm")


def test_missing_entry(tmp_path):
    folder = write(tmp_path / "c", {"kernel.py": "def matmul(a, b):\n    return a\n"})
    with pytest.raises(CandidateLoadError, match="defines no callable `gemm`"):
        load_entry(folder, "gemm")


def test_sibling_modules_of_two_candidates_do_not_collide(tmp_path):
    one = write(tmp_path / "one", {"kernel.py": "from helper import VALUE\n\ndef gemm():\n    return VALUE\n",
                                   "helper.py": "VALUE = 1\n"})
    two = write(tmp_path / "two", {"kernel.py": "from helper import VALUE\n\ndef gemm():\n    return VALUE\n",
                                   "helper.py": "VALUE = 2\n"})
    assert load_entry(one, "gemm")() == 1
    assert load_entry(two, "gemm")() == 2


@pytest.mark.parametrize("source, expected", [
    ("def gemm(a, b):\n    pass\n", True),
    ("async def gemm(a, b):\n    pass\n", True),
    ("gemm = lambda a, b: a\n", True),
    ("from .impl import matmul as gemm\n", True),
    ("def _impl(a, b):\n    pass\n\ngemm: object = _impl\n", True),
    ("def matmul(a, b):\n    def gemm():\n        pass\n", False),
    ("# gemm\n", False),
    ("def gemm(a, b)\n    pass\n", None),
])
def test_defines_entry(tmp_path, source, expected):
    path = tmp_path / "kernel.py"
    path.write_text(source)
    assert defines_entry(path, "gemm") is expected
