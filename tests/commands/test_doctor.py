"""`avo doctor`: one ok/missing line per item, what to do when missing, key names but never their values."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import torch

from avo import extras
from avo.cli import main
from avo.commands import doctor

ROOT = Path(__file__).resolve().parents[2]


def test_doctor_lists_every_item_and_hides_key_values(capsys, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-value-that-must-not-show")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    real_which = shutil.which
    monkeypatch.setattr(doctor.shutil, "which", lambda name: None if name == "ncu" else real_which(name))
    code = main(["doctor"])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.strip().splitlines()
    assert all(line.split()[0] in ("ok", "missing") for line in lines)
    names = [line.split()[1] for line in lines]
    assert names == ["GPU", "torch", "Triton", "nvcc", "ncu", "git", "CuPy", "sandbox", "ANTHROPIC_API_KEY",
                     "OPENAI_API_KEY"]
    by_name = dict(zip(names, lines))
    assert by_name["ANTHROPIC_API_KEY"].startswith("ok") and "set" in by_name["ANTHROPIC_API_KEY"]
    assert by_name["OPENAI_API_KEY"].startswith("missing") and "export OPENAI_API_KEY" in by_name["OPENAI_API_KEY"]
    assert by_name["ncu"].startswith("missing") and "Nsight Compute" in by_name["ncu"]
    # a CUDA build of torch on a machine without a GPU is "missing" CUDA, and says so
    assert by_name["torch"].startswith("ok") or "CUDA is unavailable" in by_name["torch"]
    assert torch.__version__ in by_name["torch"] and by_name["Triton"].startswith("ok")
    assert "sk-ant-value" not in out


def test_doctor_says_where_the_installed_triton_interpreter_needs_avos_mend(monkeypatch):
    import triton

    from avo.evaluate import interpreter

    monkeypatch.setattr(interpreter, "scalar_index_broken", lambda: False)
    assert doctor.check_triton().detail == triton.__version__
    monkeypatch.setattr(interpreter, "scalar_index_broken", lambda: True)
    check = doctor.check_triton()
    assert check.ok and check.detail.startswith(f"{triton.__version__}; its interpreter fails on runtime loop bounds")
    assert "mended in avo's --device interpret workers" in check.detail and "Triton 3.7+ or NumPy < 2.4" in check.detail


@pytest.mark.parametrize("version", ["3.2.0", "3.3.1"])
def test_doctor_refuses_a_triton_older_than_the_pin(monkeypatch, version):
    import triton

    monkeypatch.setattr(triton, "__version__", version)
    check = doctor.check_triton()
    assert not check.ok and check.detail.startswith(f"{version}, older than 3.4")
    assert check.fix == "pip install 'triton>=3.4'"


def test_the_pin_in_pyproject_is_the_minimum_doctor_checks():
    pin = re.search(r'"triton>=(\d+)\.(\d+)"', (ROOT / "pyproject.toml").read_text())
    assert pin and tuple(map(int, pin.groups())) == doctor.MIN_TRITON


def test_doctor_exits_1_when_a_required_tool_is_missing(capsys, monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(doctor.shutil, "which", lambda name: None if name == "git" else real_which(name))
    assert main(["doctor"]) == 1
    assert "install git" in capsys.readouterr().out


def cupy_line(monkeypatch, torch_cuda, cupys, bindings):
    monkeypatch.setattr(extras, "torch_cuda", lambda: torch_cuda)
    monkeypatch.setattr(extras, "cupy_installs", lambda: [extras.Installed(n, "14.2.0", c) for n, c in cupys])
    monkeypatch.setattr(extras, "cuda_bindings",
                        lambda: bindings and extras.Installed("cuda-bindings", bindings, int(bindings.split(".")[0])))
    return doctor.check_cupy()


@pytest.mark.parametrize("torch_cuda,extra", [(13, "cuda13"), (12, "cuda12"), (None, "cuda13")])
def test_missing_cupy_names_the_extra_for_torchs_cuda(monkeypatch, torch_cuda, extra):
    check = cupy_line(monkeypatch, torch_cuda, [], None)
    assert not check.ok and check.detail.startswith("not installed")
    assert check.fix.startswith(extras.install_command(extra)) and f"avo's {extra} extra" in check.fix


def test_cupy_built_for_another_cuda_than_torch_is_replaced(monkeypatch):
    check = cupy_line(monkeypatch, 13, [("cupy-cuda12x", 12)], "12.9.4")
    assert not check.ok and check.detail == "cupy-cuda12x 14.2.0 is built for CUDA 12, torch for CUDA 13"
    assert check.fix.startswith(f"pip uninstall -y cupy-cuda12x && {extras.install_command('cuda13')}")


def test_two_cupy_builds_are_both_removed(monkeypatch):
    check = cupy_line(monkeypatch, 12, [("cupy-cuda12x", 12), ("cupy-cuda13x", 13)], "12.9.4")
    assert not check.ok and "overwrite each other's files" in check.detail
    assert check.fix.startswith(f"pip uninstall -y cupy-cuda12x cupy-cuda13x && {extras.install_command('cuda12')}")


@pytest.mark.parametrize("bindings,detail", [(None, "cuda-bindings is not installed"),
                                             ("12.9.4", "cuda-bindings 12.9.4 is for CUDA 12")])
def test_cuda_bindings_must_be_there_for_the_same_cuda(monkeypatch, bindings, detail):
    check = cupy_line(monkeypatch, None, [("cupy-cuda13x", 13)], bindings)
    assert not check.ok and detail in check.detail
    assert check.fix.startswith(extras.install_command("cuda13"))


@pytest.mark.parametrize("torch_cuda,said", [(13, "(CUDA 13, as torch)"), (None, "(CUDA 13; torch is a CPU build)")])
def test_a_matching_install_is_ok(monkeypatch, torch_cuda, said):
    check = cupy_line(monkeypatch, torch_cuda, [("cupy-cuda13x", 13)], "13.5.0")
    assert check.ok and check.detail == f"cupy-cuda13x 14.2.0, cuda-bindings 13.5.0 {said}"
