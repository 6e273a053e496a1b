"""`avo profile` and `avo inspect` through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from avo.cli import main
from avo.gpus import nvml_device_name

TINY = Path(__file__).parents[1] / "profile" / "tiny_gemm"


def _one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("avo: error:")
    return err


def test_bad_input_is_one_line_with_exit_code_2(capsys, tmp_path):
    tiny = str(TINY)
    assert "candidate folder not found" in _one_line_error(capsys, ["inspect", str(tmp_path / "x"), "--kernel", "gemm"])
    assert "has no kernel.py" in _one_line_error(capsys, ["inspect", str(tmp_path), "--kernel", "gemm"])
    assert "unknown GPU 'a100'" in _one_line_error(capsys, ["inspect", tiny, "--kernel", "gemm", "--gpu", "a100"])
    assert "--case must be 0 or more" in _one_line_error(capsys, ["profile", tiny, "--kernel", "gemm", "--case", "-1"])
    assert "does not exist" in _one_line_error(capsys, ["inspect", tiny, "--kernel", "gemm", "--case", "7"])
    assert "Missing option '--kernel'" in _one_line_error(capsys, ["profile", str(TINY)])
    assert "no case named 'b1'" in _one_line_error(capsys, ["profile", tiny, "--kernel", "gemm", "--case", "b1"])
    assert "unknown suite 'long'" in _one_line_error(capsys, ["inspect", tiny, "--kernel", "gemm", "--suite", "long",
                                                               "--case", "x"])
    assert "needs a candidate folder, or --library" in _one_line_error(capsys, ["profile", "--kernel", "gemm"])
    assert "a candidate folder or --library, not both" in _one_line_error(
        capsys, ["profile", tiny, "--library", "--kernel", "gemm"])


def test_a_case_is_named_by_index_or_by_name_in_any_suite(capsys):
    from avo.tasks import load

    wide = [c.name for c in load("gemm").cases("wide")]
    assert main(["inspect", str(TINY), "--kernel", "gemm", "--suite", "wide", "--case", wide[3], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["case"] == wide[3]
    assert main(["inspect", str(TINY), "--kernel", "gemm", "--suite", "wide", "--case", "3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["case"], data["suite"]) == (wide[3], "wide")


@pytest.mark.skipif(nvml_device_name() is not None, reason="this machine has a GPU")
def test_profile_without_a_gpu_says_so(capsys):
    err = _one_line_error(capsys, ["profile", str(TINY), "--kernel", "gemm"])
    assert "needs an NVIDIA GPU" in err and "avo inspect" in err


def test_avo_inspect_prints_the_report_as_json(capsys):
    assert main(["inspect", str(TINY), "--kernel", "gemm", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kernel"] == "_tiny_gemm_kernel" and data["target"] == "sm_90a"
    assert data["histogram"]["HGMMA"] > 0 and data["spills"]["store_bytes"] == 0
