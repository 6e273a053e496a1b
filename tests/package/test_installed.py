"""A package `avo package` wrote, pip-installed into a new virtualenv and used where avo cannot be imported: on CPU
tensors the ops give the library's answer exactly, torch.compile(fullgraph=True) traces through them, and patch()
routes only the calls it should. The probe (probe_installed.py) blocks avo and its agent packages on import and
reports any attempt, so a package that imported avo anywhere on these paths fails here.

torch.compile runs with backend="aot_eager": it traces the whole graph with fake tensors (the op's register_fake)
as inductor would, without inductor's C++ compile, which takes minutes on a small CPU machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
from package_runs import ATTENTION_TRITON, GEMM_CUDA, GEMM_TRITON, packaged

PROBE = Path(__file__).with_name("probe_installed.py")


def _virtualenv(where: Path) -> Path:
    """A new virtualenv seeing this environment's packages (torch, triton), but not avo's editable install:
    --system-site-packages reaches the base interpreter's site-packages, and a .pth adds this environment's own
    when it is a virtualenv itself (a .pth's folders are searched, but their own .pth files, such as avo's editable
    finder, are not run)."""
    venv.create(where, system_site_packages=True, with_pip=False)
    python = where / "bin" / "python"
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    if sys.prefix != sys.base_prefix:
        Path(purelib, "outer_environment.pth").write_text("\n".join(sorted(ours)) + "\n")
    return python


@pytest.fixture(scope="module")
def probed(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("installed")
    runs = root / "runs"
    python = _virtualenv(root / "venv")
    for example, name in ((ATTENTION_TRITON, "evolved_attention"), (GEMM_TRITON, "evolved_gemm")):
        folder = packaged(runs, example, root / name, name)
        # no index, no build isolation: nothing is downloaded, the dependencies must already be met
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-index", "--no-build-isolation",
                        str(folder)], check=True, capture_output=True, cwd=root)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TRITON_INTERPRET"))}
    done = subprocess.run([python, "-I", str(PROBE), "evolved_attention", "evolved_gemm"], capture_output=True,
                          text=True, cwd=root, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "venv": str(root / "venv")}


def test_the_installed_package_never_imports_avo(probed):
    assert probed["blocked_attempts"] == [] and probed["avo_importable"] is False
    assert all(path.startswith(probed["venv"]) for path in probed["files"])


def test_on_cpu_tensors_the_ops_give_the_library_answer_exactly(probed):
    attention, gemm = probed["attention"], probed["gemm"]
    assert attention["equal"] and attention["calls"] == {"op": 1, "library": 1}
    assert attention["fallbacks"] == {"device cpu": 1}
    assert gemm["equal"] and gemm["calls"] == {"op": 1, "library": 1}
    assert attention["kernel_imports"] and gemm["kernel_imports"]


def test_torch_compile_fullgraph_traces_through_the_ops(probed):
    assert probed["attention"]["compiled_equal"] and probed["gemm"]["compiled_equal"]


def test_patch_routes_only_the_calls_it_should(probed):
    attention, gemm = probed["attention"], probed["gemm"]
    assert attention["patched_routed"] == 1 and attention["patched_equal"] and attention["restored"]
    assert gemm["patched_routed"] == 2 and gemm["restored"]


def test_a_cuda_kernel_imports_through_its_own_copy_of_avo_cuda(tmp_path):
    folder = packaged(tmp_path / "runs", GEMM_CUDA, tmp_path / "pkg", "evolved_cuda_gemm")
    done = subprocess.run([sys.executable, "-I", str(PROBE), "--kernel", str(folder), "evolved_cuda_gemm", "gemm"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"kernel_module": "evolved_cuda_gemm.kernel_module", "entry": "gemm", "blocked_attempts": []}
