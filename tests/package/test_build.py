"""`avo package` on the shipped example runs: what the package holds, read from the lineage, and the refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from package_runs import ATTENTION_TRITON, EXAMPLES, GEMM_CUDA, KERNELBENCH, example_run

from avo.cli import main
from avo.package.coverage import _from_name, capability_of, case_shapes
from avo.package.vendor import imports_of
from avo.run.directory import Run
from avo.tasks import load
from avo.tasks.workload import from_model


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("runs")


def _package(runs: Path, out: Path, *args: str) -> tuple[int, str]:
    return main(["package", *args, "--out", str(out), "--runs-dir", str(runs)]), str(out)


def test_the_best_of_a_run_is_packaged_from_its_lineage_commit(runs, tmp_path, capsys):
    run_id = example_run(runs, ATTENTION_TRITON)
    run = Run.open(run_id, runs)
    (run.workspace / "kernel.py").write_text("raise SystemExit('the workspace, not the lineage')\n")
    best, sha = run.lineage.best, run.lineage.info(run.lineage.best).sha
    run.lineage.checkout(best, tmp_path / "committed")
    code, _ = _package(runs, tmp_path / "pkg", run_id)
    assert code == 0, capsys.readouterr().err
    name = f"attention_{run_id.replace('-attention', '').replace('-', '_')}"
    package = tmp_path / "pkg" / name
    assert (package / "kernel" / "kernel.py").read_text() == (tmp_path / "committed" / "kernel.py").read_text()
    manifest = json.loads((package / "MANIFEST.json").read_text())
    result = run.load_eval(best)
    assert (manifest["run_id"], manifest["cid"], manifest["commit"]) == (run_id, best, sha)
    assert [c["speedup"] for c in manifest["cases"]] == [c.speedup for c in result.cases]
    assert [c["host_us"] for c in manifest["cases"]] == [c.host_us for c in result.cases]
    assert all("library_host_us" in c for c in manifest["cases"])  # None in a run recorded before it was kept
    assert manifest["measured"]["gpu_device"] == "NVIDIA H200" and manifest["measured"]["library"] == "cudnn sdpa"
    assert manifest["measured"]["versions"]["torch"] == result.versions["torch"]
    guard = manifest["guard"]
    assert guard["device_names"] == ["NVIDIA H200"] and guard["capabilities"] == [[9, 0]]
    assert guard["dtypes"] == ["bfloat16", "float16"]
    assert guard["ranges"]["S"] == [1, 32768] and guard["ranges"]["group"] == [1, 8]
    assert guard["values"] == {"D": [64, 128], "causal": [False, True]}
    assert manifest["requirements"] == ["torch>=2.4", "triton"]
    assert f'name = "{name}"' in (tmp_path / "pkg" / "pyproject.toml").read_text()
    assert imports_of(tmp_path / "pkg") & {"avo", "anthropic", "openai", "git", "typer", "rich"} == set()
    run.close()


def test_a_cuda_kernel_carries_its_own_copy_of_avo_cuda(runs, tmp_path, capsys):
    run_id = example_run(runs, GEMM_CUDA)
    code, _ = _package(runs, tmp_path / "pkg", run_id, "--name", "my_gemm")
    assert code == 0, capsys.readouterr().err
    package = tmp_path / "pkg" / "my_gemm"
    kernel = (package / "kernel" / "kernel.py").read_text()
    assert "from my_gemm._cuda import load_module, tensor_map" in kernel and "avo" not in kernel.replace(
        "avo: tune", "")
    assert "from my_gemm._cuda_tensor_map import TensorMap, tensor_map" in (package / "_cuda.py").read_text()
    assert "from my_gemm import _extras as extras" in (package / "_cuda.py").read_text()
    assert imports_of(tmp_path / "pkg") & {"avo", "anthropic", "openai", "git", "typer", "rich"} == set()
    manifest = json.loads((package / "MANIFEST.json").read_text())
    assert manifest["kernel"] == "cuda" and any(r.startswith("cupy-cuda13x") for r in manifest["requirements"])
    assert manifest["guard"]["ranges"] == {"M": [1, 16384], "N": [1, 14336], "K": [1, 8192]}
    # The shipped run's best predates CUDA_GRAPHS: inside a CUDA graph capture its calls go to the library.
    assert manifest["cuda_graphs"] is False
    assert "kernel.py does not declare CUDA_GRAPHS" in capsys.readouterr().out


def test_whether_a_kernel_may_be_captured_is_read_from_its_source_not_run(tmp_path):
    from avo.package.build import declares

    path = tmp_path / "kernel.py"
    for source, expected in (("CUDA_GRAPHS = True\n", True), ("CUDA_GRAPHS = False\n", False),
                             ("def f():\n    CUDA_GRAPHS = True\n", False), ("X = CUDA_GRAPHS = True\n", True),
                             ("raise SystemExit('never run')\nCUDA_GRAPHS = True\n", True),
                             ("CUDA_GRAPHS = (\n", False)):
        path.write_text(source)
        assert declares(path, "CUDA_GRAPHS") is expected, source
    seeds = Path(__file__).resolve().parents[2] / "kernels"
    assert declares(seeds / "gemm" / "cuda_wgmma" / "kernel.py", "CUDA_GRAPHS")
    assert declares(seeds / "attention" / "cuda_fa3" / "kernel.py", "CUDA_GRAPHS")


def test_a_case_no_suite_holds_is_read_from_its_name(runs):
    run = Run.open(example_run(runs, ATTENTION_TRITON), runs)
    result = run.load_eval(run.lineage.best).model_copy(deep=True)
    result.cases[0].case, result.cases[1].case = "b3_h12-4_s777_d64_causal", "not a shape"
    shapes, unread = case_shapes(load("attention"), result)
    assert {"B": 3, "Hq": 12, "Hkv": 4, "S": 777, "D": 64, "causal": True, "dtype": "bfloat16"} in shapes
    assert unread == ["not a shape"]
    run.close()


def test_a_workload_run_guards_the_workload_cases_it_timed(tmp_path, capsys):
    runs = tmp_path / "runs"
    run = Run.open(example_run(runs, GEMM_CUDA), runs)
    workload = from_model("gemm", EXAMPLES.parent.parent / "examples" / "models" / "llama-3-8b.json", "48")
    config = run.info()["config"]
    config["evaluation"]["workload"] = workload.model_dump()
    run._update(config=config)
    best = run.lineage.best
    result = run.load_eval(best)
    bench = [c for c in result.cases if c.speedup is not None][-len(workload.cases):]
    for case, named in zip(bench, workload.cases):  # timed at the workload's cases, as its run would have been
        case.case, case.dtype = named.name, named.dtype
    run.save_eval(best, result)
    run.close()
    code, _ = _package(runs, tmp_path / "pkg", run.id, "--name", "llama_gemm")
    assert code == 0, capsys.readouterr().err
    manifest = json.loads((tmp_path / "pkg" / "llama_gemm" / "MANIFEST.json").read_text())
    assert manifest["cases_not_guarded"] == []
    assert manifest["guard"]["ranges"]["N"] == [1, 28672] and manifest["guard"]["ranges"]["K"][1] == 14336


def test_a_case_named_with_its_dtype_is_read_from_its_name():
    assert _from_name("attention", "b1_h4-2_s9_d64_causal_fp16") == {"B": 1, "Hq": 4, "Hkv": 2, "S": 9, "D": 64,
                                                                     "causal": True}
    assert _from_name("gemm", "77x128x64_fp16") == {"M": 77, "N": 128, "K": 64}
    assert _from_name("gemm", "77x128x64000") == {"M": 77, "N": 128, "K": 64000}


def _refused(capsys, code: int) -> str:
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_candidate_that_is_not_correct_is_refused(runs, tmp_path, capsys):
    run_id = example_run(runs, GEMM_CUDA)
    code, _ = _package(runs, tmp_path / "pkg", run_id, "c0032")
    assert "c0032 is compile_error, not correct" in _refused(capsys, code)
    assert not (tmp_path / "pkg").exists()


def test_a_candidate_measured_only_under_the_interpreter_needs_allow_unmeasured(runs, tmp_path, capsys):
    run_id = example_run(runs, ATTENTION_TRITON)
    run = Run.open(run_id, runs)
    best = run.lineage.best
    measured = run.load_eval(best)
    try:
        run.save_eval(best, measured.model_copy(update={"timing_source": "interpreter", "device": "interpret"}))
        code, _ = _package(runs, tmp_path / "pkg", run_id)
        assert "--allow-unmeasured" in _refused(capsys, code) and not (tmp_path / "pkg").exists()
        code, _ = _package(runs, tmp_path / "pkg", run_id, "--allow-unmeasured", "--name", "unmeasured")
        assert code == 0, capsys.readouterr().err
        manifest = json.loads((tmp_path / "pkg" / "unmeasured" / "MANIFEST.json").read_text())
        assert manifest["measured"]["timing"] == "interpreter" and manifest["guard"]["device_names"] == []
        assert manifest["guard"]["capabilities"] == []
    finally:
        run.save_eval(best, measured)
        run.close()


def test_an_existing_non_empty_out_is_refused(runs, tmp_path, capsys):
    run_id = example_run(runs, ATTENTION_TRITON)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "keep.txt").write_text("mine")
    code, _ = _package(runs, tmp_path / "pkg", run_id)
    assert "not empty" in _refused(capsys, code)
    assert [p.name for p in (tmp_path / "pkg").iterdir()] == ["keep.txt"]


def test_a_kernelbench_run_is_refused_saying_what_is_supported(runs, tmp_path, capsys):
    code, _ = _package(runs, tmp_path / "pkg", example_run(runs, KERNELBENCH))
    assert "supports the built-in attention and gemm tasks" in _refused(capsys, code)


@pytest.mark.parametrize("name", ["2fast", "torch", "my-op", "class"])
def test_a_bad_name_is_refused(runs, tmp_path, capsys, name):
    code, _ = _package(runs, tmp_path / "pkg", example_run(runs, ATTENTION_TRITON), "--name", name)
    assert "--name" in _refused(capsys, code)


def test_the_host_time_per_call_of_kernel_and_library_is_summed_up_where_both_were_recorded():
    from avo.package.manifest import host_times

    cases = [{"host_us": 80.0, "library_host_us": 28.0}, {"host_us": 90.0, "library_host_us": 30.0},
             {"host_us": 70.0, "library_host_us": None}, {"host_us": None, "library_host_us": None}]
    assert host_times({"cases": cases}) == (85.0, 29.0, 2)
    assert host_times({"cases": cases[2:]}) is None  # a run recorded before the library's host time was kept


def test_the_runs_compute_capability_as_recorded_else_by_the_gpus_name():
    from types import SimpleNamespace

    def result(**versions):
        return SimpleNamespace(versions=versions)

    assert capability_of(result(gpu_capability="10.0", gpu_device="NVIDIA H200")) == [10, 0]  # recorded wins
    assert capability_of(result(gpu_device="NVIDIA H100 80GB HBM3")) == [9, 0]  # a run recorded before it was kept
    assert capability_of(result(gpu_device="none (interpreter)")) == capability_of(result()) == []
