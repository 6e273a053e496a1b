"""`avo doctor`: one ok/missing line per item, what to do when missing, key names but never their values."""

from __future__ import annotations

import shutil

from avo.cli import main
from avo.commands import doctor


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
    assert names == ["GPU", "torch", "Triton", "nvcc", "ncu", "git", "CuPy", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"]
    by_name = dict(zip(names, lines))
    assert by_name["ANTHROPIC_API_KEY"].startswith("ok") and "set" in by_name["ANTHROPIC_API_KEY"]
    assert by_name["OPENAI_API_KEY"].startswith("missing") and "export OPENAI_API_KEY" in by_name["OPENAI_API_KEY"]
    assert by_name["ncu"].startswith("missing") and "Nsight Compute" in by_name["ncu"]
    assert by_name["torch"].startswith("ok") and by_name["Triton"].startswith("ok")
    assert "sk-ant-value" not in out


def test_doctor_exits_1_when_a_required_tool_is_missing(capsys, monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(doctor.shutil, "which", lambda name: None if name == "git" else real_which(name))
    assert main(["doctor"]) == 1
    assert "install git" in capsys.readouterr().out
