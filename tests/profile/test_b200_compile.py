"""Every Triton seed compiles for sm_100a on the CPU through `avo inspect --gpu b200`, and its matmuls are tcgen05.

No B200 is needed: Triton builds the cubin for the b200 target and cuobjdump reads it back. Each seed is compiled
once for this module (about 10 s each) and the tests below read that one report.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import needs
import pytest

from avo.cli import main
from avo.cuda import Build
from avo.gpus import PROFILES
from avo.profile import ProfileError
from avo.profile.compiler import nvcc_inspect

KERNELS = Path(__file__).parents[2] / "kernels"
SEEDS = sorted(p for p in KERNELS.glob("*/triton_*") if (p / "kernel.py").is_file())
_reports: dict[Path, dict] = {}


def _inspect_b200(seed: Path) -> dict:
    if seed not in _reports:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["inspect", str(seed), "--kernel", seed.parent.name, "--gpu", "b200", "--json"])
        assert code == 0, out.getvalue()[-500:]
        _reports[seed] = json.loads(out.getvalue())
    return _reports[seed]


def test_the_seeds_are_found():
    assert {f"{p.parent.name}/{p.name}" for p in SEEDS} >= {
        "gemm/triton_naive", "gemm/triton_tiled", "gemm/triton_tma_persistent",
        "attention/triton_naive", "attention/triton_fa2"}


@pytest.mark.parametrize("seed", SEEDS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_seed_compiles_for_sm_100a_with_its_matmuls_on_tcgen05(seed):
    report = _inspect_b200(seed)
    assert report["target"] == "sm_100a" and report["gpu"] == "b200" and report["problems"] == []
    main_kernel = next(k for k in report["kernels"] if k["name"] == report["kernel"])
    assert main_kernel["target"] == "sm_100a"
    fam = main_kernel["families"]
    # tl.dot on sm_100a: tcgen05.mma with the accumulator in tensor memory, read back with tcgen05.ld
    assert fam["tensor core (tcgen05.mma)"] > 0 and main_kernel["histogram"]["UTCHMMA"] > 0
    assert fam["tensor memory (tcgen05.ld/st/cp)"] > 0
    assert fam["tensor core (wgmma)"] == 0 and fam["tensor core (mma.sync)"] == 0
    ptx = main_kernel["ptx_histogram"]
    assert ptx["tcgen05.mma"] > 0 and ptx["tcgen05.ld"] > 0 and ptx.get("wgmma.mma_async", 0) == 0
    assert 0 < main_kernel["registers"] <= 255
    assert 0 < main_kernel["shared_bytes"] <= 227 * 1024
    assert isinstance(main_kernel["spills"]["store_bytes"], int)


def test_the_tma_seed_keeps_its_tma_loads_and_stores_on_sm_100a():
    report = _inspect_b200(KERNELS / "gemm" / "triton_tma_persistent")
    [kernel] = [k for k in report["kernels"] if k["name"] == "_gemm_tma_persistent"]
    assert kernel["histogram"]["UTMALDG"] > 0 and kernel["histogram"]["UTMASTG"] > 0
    assert kernel["families"]["TMA"] > 0 and kernel["ptx_histogram"]["cp.async.bulk.tensor"] > 0
    assert kernel["spills"] == {"store_bytes": 0, "load_bytes": 0}


def test_the_text_report_names_the_blackwell_instructions(capsys):
    seed = KERNELS / "gemm" / "triton_naive"
    assert main(["inspect", str(seed), "--kernel", "gemm", "--gpu", "b200"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("compile report for sm_100a (b200)")
    assert "tensor core (tcgen05.mma) " in text and "PTX: tcgen05.mma " in text
    assert "tensor core (tcgen05.mma) 0," not in text


@needs.nvcc
def test_why_the_wgmma_seed_is_refused_on_b200_ptxas_rejects_it_for_sm_100a():
    # gemm.cu with the defaults written in it: every build of the seed fails alike, so one is enough.
    folder = KERNELS / "gemm" / "cuda_wgmma"
    with pytest.raises(ProfileError, match=r"Instruction 'wgmma\.\w+' not supported on \.target 'sm_100a'"):
        nvcc_inspect(folder, PROFILES["b200"], builds=[Build(folder / "gemm.cu", folder, ())])


@needs.nvcc
def test_the_mma_sync_cuda_seed_builds_for_sm_100a_without_tcgen05():
    kernels = nvcc_inspect(KERNELS / "gemm" / "cuda_mma", PROFILES["b200"])
    assert kernels and all(k["target"] == "sm_100a" for k in kernels)
    assert all(k["families"]["tensor core (mma.sync)"] > 0 for k in kernels)
    assert all(k["families"]["tensor core (tcgen05.mma)"] == 0 for k in kernels)  # runs, but leaves tcgen05 unused
