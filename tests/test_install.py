"""The install path a new user takes: README's set-up lines name extras that exist, .ci/run installs what README's
CPU line installs plus the cuda13 and ray extras and requires what they provide, and the offline bundle refuses an
extra that does not say which CUDA."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import needs
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()
EDITABLE = re.compile(r"pip install (?:--quiet )?-e '\.\[([\w,]*)\]'")


def pyproject() -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10: pytest's own dependency
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def optional_dependencies() -> dict:
    return pyproject()["project"]["optional-dependencies"]


@pytest.fixture
def extras() -> set[str]:
    return set(optional_dependencies())


def setup_block() -> list[str]:
    """The command lines of README's set-up section."""
    section = README.split("## Set-up (fresh machine)", 1)[1]
    return section.split("```bash\n", 1)[1].split("```", 1)[0].strip().splitlines()


def test_every_extra_readme_installs_exists(extras):
    named = {e for group in EDITABLE.findall(README) for e in group.split(",")}
    assert {"dev", "cuda13"} <= named
    assert named <= extras


def test_ci_installs_what_readmes_set_up_line_installs_plus_cuda13_and_ray():
    install, test = setup_block()
    [readme_extras] = EDITABLE.findall(install)
    [ci_extras] = EDITABLE.findall(CI)
    assert ci_extras.split(",") == readme_extras.split(",") + ["cuda13", "ray"]
    assert re.search(rf"^AVO_TEST_REQUIRE=\S+ python3 {re.escape(test.removeprefix('python '))}$", CI, re.M)


def test_ci_requires_what_the_cuda13_dev_and_ray_extras_provide():
    [required] = re.findall(r"^AVO_TEST_REQUIRE=(\S+) ", CI, re.M)
    assert set(needs.WHY) == {"cupy", "cuda.bindings", "importlinter.cli", "ray"}
    # NVIDIA's NVRTC wheel, for CPU compiles; bubblewrap, which .ci/run installs from Debian's packages
    assert set(required.split(",")) == set(needs.WHY) | {"nvrtc", "bwrap"}
    assert re.search(r"apt-get install -y -qq bubblewrap", CI)


def test_the_test_line_runs_on_what_the_dev_extra_installs():
    _, test = setup_block()
    dev = optional_dependencies()["dev"]
    assert " -n 2 --dist loadfile" in test and any(d.startswith("pytest-xdist") for d in dev)


def test_ci_lints_with_what_the_dev_extra_installs():
    dev = optional_dependencies()["dev"]
    assert any(d.startswith("ruff") for d in dev) and any(d.startswith("import-linter") for d in dev)
    assert re.search(r"^python3 -m ruff check \.$", CI, re.M)


def test_the_readme_gpu_line_names_the_cuda_extras():
    assert "pip install -e '.[dev,cuda13]'" in README and "cuda12" in README


def test_the_offline_bundle_wants_the_cuda_major_named(tmp_path):
    done = subprocess.run(["bash", str(ROOT / "scripts" / "wheelhouse.sh"), "--extras", "dev,cuda", "--out",
                           str(tmp_path / "whl")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and not (tmp_path / "whl").exists()
    assert done.stderr.strip() == ("wheelhouse: error: --extras cuda: name the target's CUDA major, cuda13 or cuda12 "
                                   "(the CUDA its torch is built for)")
