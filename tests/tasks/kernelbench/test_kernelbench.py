"""The KernelBench-format task on the CPU: loading and its errors, suites and sizes, inputs, reference, library,
parameters handed to ModelNew, and the first candidate. Small problem files under kb_problems/."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn as nn

from avo import tasks
from avo.errors import UserError
from avo.evaluate import guards
from avo.tasks import relative_error
from avo.tasks.kernelbench.spec import absolute_spec, with_options
from avo.tasks.kernelbench.task import TINY_ELEMENTS, KernelBenchTask
from avo.tasks.kernelbench.sizes import second_sizes

pytestmark = pytest.mark.usefixtures("private_cache")

PROBLEMS = Path(__file__).parent / "kb_problems"
BROKEN = PROBLEMS / "broken"


def load(name: str, options: str = "") -> KernelBenchTask:
    return tasks.load(str(PROBLEMS / f"{name}.py") + options)


@pytest.fixture(scope="module")
def matmul():
    return load("matmul_bias_relu")


@pytest.mark.parametrize("name, phrase", [
    ("no_model", "defines no `Model`"),
    ("no_get_inputs", "defines no `get_inputs()`"),
    ("no_get_init_inputs", "defines no `get_init_inputs()`"),
    ("import_fails", "importing it failed: ZeroDivisionError: float division by zero"),
    ("returns_tuple", "Model.forward returns a torch.return_types.max"),
])
def test_a_broken_file_is_one_clear_line(name, phrase):
    with pytest.raises(UserError) as caught:
        tasks.load(str(BROKEN / f"{name}.py"))
    message = str(caught.value)
    assert phrase in message and f"{name}.py" in message
    assert "\n" not in message


@pytest.mark.parametrize("name, phrase", [
    ("init_raises", "Model.__init__ raised ValueError: no weights"),
    ("forward_raises", "Model.forward raised RuntimeError: bad forward"),
])
def test_a_model_that_raises_is_the_files_fault_in_one_line(name, phrase, tmp_path, capsys):
    from avo.cli import main

    seed = tmp_path / "seed"  # one the heuristic agent can tune, so the file's own fault is what is left to report
    seed.mkdir()
    (seed / "kernel.py").write_text("SCALE = 1  # avo: tune 1 2\n")
    code = main(["evolve", "--kernel", str(BROKEN / f"{name}.py"), "--device", "interpret", "--agent", "heuristic",
                 "--seed-kernel", str(seed), "--runs-dir", str(tmp_path / "runs"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and phrase in err and f"{name}.py" in err and len(err.strip().splitlines()) == 1, err
    assert not list(tmp_path.rglob("run.json"))


def test_bad_spec_options_and_missing_files_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="unknown task option 'baseline=jit'"):
        load("softmax", "?baseline=jit")
    with pytest.raises(UserError, match="task file not found"):
        tasks.load(str(tmp_path / "absent.py") + "?baseline=compile")
    syntax = tmp_path / "bad.py"
    syntax.write_text("class Model(:\n")
    with pytest.raises(UserError, match=r"importing it failed: SyntaxError: .* \(line 1\)"):
        tasks.load(str(syntax))


def test_spec_options_and_absolute_spec(monkeypatch):
    task = load("softmax", "?dtype=bf16&baseline=compile")
    assert (task.baseline, task.dtype, task.name, task.entry) == ("compile", "bfloat16", "softmax", "ModelNew")
    assert task.library_name() == "torch.compile(Model)"
    assert task.spec == f"{PROBLEMS.resolve() / 'softmax.py'}?baseline=compile&dtype=bfloat16"
    monkeypatch.chdir(PROBLEMS)
    here = str(PROBLEMS.resolve() / "softmax.py")
    assert absolute_spec("softmax.py") == here
    assert with_options("softmax.py", baseline=None) == here
    assert with_options("softmax.py?dtype=fp16", baseline="compile") == f"{here}?baseline=compile&dtype=float16"
    assert with_options("gemm", baseline=None) == "gemm"
    with pytest.raises(UserError, match="--baseline applies to KernelBench-format .py tasks only"):
        with_options("gemm", baseline="compile")
    with pytest.raises(UserError, match="unknown task option 'baseline=jit'"):
        with_options("softmax.py", baseline="jit")


def test_knobs_and_suites(matmul):
    assert matmul.problem.knobs == ["batch_size", "in_features", "out_features"]
    check = matmul.cases("check")
    file_size = {"batch_size": 256, "in_features": 512, "out_features": 384}
    assert [c.params["sizes"] for c in check[:3]] == [file_size] * 3
    # About three quarters, ragged: multiples of 8 but not of 64 (288 already is not).
    assert check[3].params["sizes"] == {"batch_size": 184, "in_features": 376, "out_features": 288}
    assert [c.params["sizes"] for c in matmul.cases("bench")] == [file_size]
    for suite in ("check", "bench", "tiny"):
        names = [c.name for c in matmul.cases(suite)]
        assert len(names) == len(set(names))
        assert all(c.dtype == "float32" for c in matmul.cases(suite))
    for case in matmul.cases("tiny"):
        assert matmul._measure(case.params["sizes"], None).elements <= TINY_ELEMENTS
    with pytest.raises(UserError, match="unknown suite"):
        matmul.cases("huge")


def test_constants_that_models_code_reads_stay_put():
    task = load("helper_reads_size")
    assert task.problem.knobs == ["channels", "width"]
    tiny = task.cases("tiny")
    assert any(c.params["sizes"] != {"channels": 8, "width": 32} for c in tiny)
    for case in tiny:
        x, = task.make_inputs(case, 0, "cpu")
        sizes = case.params["sizes"]
        assert tuple(x.shape) == (16, sizes["channels"], sizes["width"])
        assert task.output_like(case, (x,)) == ((16, sizes["channels"] * sizes["width"]), "float32")


def test_derived_constants_follow_their_sources():
    task = load("cross_entropy")
    assert task.problem.knobs == ["batch_size", "num_classes"] and list(task.problem.derived) == ["input_shape"]
    for case in [*task.cases("tiny"), task.cases("check")[-1]]:
        scores, targets = task.make_inputs(case, 1, "cpu")
        classes = case.params["sizes"]["num_classes"]
        assert scores.shape[1] == classes < 1024 and int(targets.max()) < classes
        assert task.output_like(case, (scores, targets)) == ((), "float32")
    assert task.problem.module.input_shape == (1024,)  # restored after each use


def test_init_only_constants_below_16_stay_put():
    conv = load("conv2d")
    assert "kernel_size" not in conv.problem.knobs and "out_channels" in conv.problem.knobs
    for case in conv.cases("tiny"):
        x = conv.make_inputs(case, 0, "cpu")
        assert conv._variant_of(x).init_inputs[2] == 3


def test_make_inputs_is_seeded_and_leaves_the_global_rng_alone(matmul):
    case = matmul.cases("tiny")[0]
    state = torch.random.get_rng_state()
    a, = matmul.make_inputs(case, 5, "cpu")
    b, = matmul.make_inputs(case, 5, "cpu")
    c, = matmul.make_inputs(case, 6, "cpu")
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert torch.equal(state, torch.random.get_rng_state())


def test_reference_is_float64_and_library_is_within_tolerance(matmul):
    for case in matmul.cases("tiny"):
        x = matmul.make_inputs(case, 1, "cpu")
        ref, lib = matmul.reference(*x), matmul.library(*x)
        assert ref.dtype == torch.float64 and lib.dtype == torch.float32
        assert (tuple(lib.shape), "float32") == matmul.output_like(case, x)
        assert 0 < relative_error(lib, ref) < matmul.tolerance(case.dtype)
    second = matmul.cases("check")[3]
    x = matmul.make_inputs(second, 1, "cpu")
    assert matmul.output_like(second, x) == ((184, 288), "float32")
    assert tuple(matmul.library(*x).shape) == (184, 288)


def test_zeros_never_pass_the_relative_norm(matmul):
    case = matmul.cases("tiny")[0]
    ref = matmul.reference(*matmul.make_inputs(case, 2, "cpu"))
    for dtype in ("float32", "float16", "bfloat16"):
        assert relative_error(torch.zeros_like(ref), ref) == 1.0 > matmul.tolerance(dtype)
    assert matmul.tolerance("int64") == 0.0
    with pytest.raises(UserError):
        matmul.tolerance("complex64")


def test_a_model_that_writes_into_its_inputs_never_changes_the_callers(tmp_path):
    task = load("inplace_relu")
    case = task.cases("check")[0]
    x, = task.make_inputs(case, 3, "cpu")
    before = x.clone()
    ref = task.reference(x)
    lib = task.library(x)
    assert torch.equal(x, before) and bool((x < 0).any())
    assert task._variant_of((x,)).mutates_inputs is True
    assert relative_error(lib, ref) < 1e-6


class _NoisyModelNew(nn.Module):
    def forward(self, x):
        return x + torch.randn(x.shape)


def test_dropout_is_off_and_random_draws_are_seeded_per_call():
    task = load("linear_dropout")
    x = task.make_inputs(task.cases("check")[0], 0, "cpu")
    assert relative_error(task.library(*x), task.reference(*x)) < 1e-6
    assert not task._variant_of(x).seeded

    noisy = load("random_noise")
    x = noisy.make_inputs(noisy.cases("check")[0], 0, "cpu")
    variant = noisy._variant_of(x)
    assert variant.seeded and variant.compute is None  # float64 draws differ from float32 ones: no upcast
    ref = noisy.reference(*x)
    assert relative_error(noisy.call(_NoisyModelNew, x), ref) == 0 == relative_error(noisy.library(*x), ref)
    assert relative_error(ref, x[0]) > 0.1

    chaotic = load("python_random")
    with pytest.raises(UserError, match="two calls of Model on the same inputs disagree even from the same random"):
        chaotic.preflight("interpret")


def test_flops_and_bytes():
    matmul, conv, softmax = load("matmul_bias_relu"), load("conv2d"), load("softmax")
    case = matmul.cases("bench")[0]
    assert matmul.flops(case) == 2 * 256 * 512 * 384
    assert matmul.bytes(case) == 4 * (256 * 512 + 256 * 384 + 384 * 512 + 384)
    case = conv.cases("bench")[0]
    assert conv.flops(case) == 2 * 8 * 32 * 32 * 32 * 16 * 9
    assert softmax.flops(softmax.cases("bench")[0]) == 0  # no matmul or convolution: times only


def test_a_model_the_meta_device_cannot_run_is_measured_for_real():
    task = load("data_dependent")
    assert task.meta_ok is False
    assert len({c.name for c in task.cases("check")}) == 3 and task.cases("tiny")[0].params["sizes"] == {
        "batch_size": 8, "dim": 32}
    case = task.cases("check")[0]
    x = task.make_inputs(case, 0, "cpu")
    assert task.output_like(case, x) == ((8, 32), "float32")
    assert task.bytes(case) == 4 * 2 * 8 * 32


def test_bf16_option_casts_and_tiny_runs_in_fp16():
    task = load("layer_norm", "?dtype=bfloat16")
    bench = task.cases("bench")[0]
    x, = task.make_inputs(bench, 0, "cpu")
    assert x.dtype == torch.bfloat16 and bench.dtype == "bfloat16" and task.tolerance("bfloat16") == 1e-2
    lib = task.library(x)
    assert lib.dtype == torch.bfloat16 and relative_error(lib, task.reference(x)) < 1e-2
    tiny = task.cases("tiny")
    assert all(c.dtype == "float16" and c.name.split("#")[0].endswith("_fp16") for c in tiny)


class _CountingModelNew(nn.Module):
    """Model's structure under its own names for the first parameter (copied in order) and Model's name for the
    second; counts constructions. Its __init__ runs a softmax, an op the softmax reference forbids."""

    built = 0

    def __init__(self, features):
        super().__init__()
        _CountingModelNew.built += 1
        torch.softmax(torch.ones(2), dim=0)
        self.scale = nn.Parameter(torch.empty(features))
        self.ln = nn.Module()
        self.ln.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        return x.clone()


def test_modelnew_gets_models_parameters_and_is_built_once_outside_the_op_recorder():
    task = load("layer_norm")
    case = task.cases("tiny")[0]
    x = task.make_inputs(case, 0, "cpu")
    lib_weight = task._variant_of(x).library_model.ln.weight
    lib_bias = task._variant_of(x).library_model.ln.bias
    assert not torch.all(lib_weight == 1) and not torch.all(lib_bias == 0)  # constant init got noise
    forbidden = frozenset({"_softmax"})
    _CountingModelNew.built = 0
    for _ in range(3):
        guards.call_watched(lambda: task.call(_CountingModelNew, x), forbidden)
    assert _CountingModelNew.built == 1
    bound = task._variant_of(x).bound[_CountingModelNew]
    assert torch.equal(bound.scale, lib_weight) and torch.equal(bound.ln.bias, lib_bias)
    assert not any(p.requires_grad for p in bound.parameters())


def test_the_first_candidate_wraps_model_and_is_recognized(matmul, tmp_path, monkeypatch):
    monkeypatch.setenv("AVO_CACHE_DIR", str(tmp_path / "cache"))
    seed = Path(matmul.default_seed())
    assert seed.is_relative_to(tmp_path / "cache") and matmul.default_seed() == str(seed)
    text = (seed / "kernel.py").read_text()
    assert text.startswith(matmul.problem.source.rstrip()) and "class ModelNew(Model):" in text
    assert matmul.is_reference_wrapper(seed)

    from avo.evaluate.worker.loader import load_entry

    entry = load_entry(seed, "ModelNew")
    for case in matmul.cases("tiny"):
        x = matmul.make_inputs(case, 4, "cpu")
        assert relative_error(matmul.call(entry, x), matmul.reference(*x)) < 1e-6

    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "kernel.py").write_text(text)
    (copy / "notes.md").write_text("plan")
    assert matmul.is_reference_wrapper(copy)
    (copy / "helper.py").write_text("")
    assert not matmul.is_reference_wrapper(copy)
    (copy / "helper.py").unlink()
    (copy / "kernel.py").write_text(text + "\n")
    assert not matmul.is_reference_wrapper(copy)


def test_preflight_refuses_inputs_that_do_not_fit(monkeypatch, matmul):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (1 << 20, 1 << 30))
    with pytest.raises(UserError, match=r"needs at least 0\.0\d GiB on the GPU .* but 0\.00 GiB are free"):
        matmul.preflight("cuda")
    matmul.preflight("interpret")
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (1 << 34, 1 << 35))
    matmul.preflight("cuda")


def test_compile_introspection_finds_the_candidates_kernel():
    """inspect_compile runs the call on meta tensors: ModelNew is built on the meta device for it."""
    from avo.gpus import PROFILES
    from avo.profile.triton_capture import inspect_case

    report = inspect_case(PROBLEMS / "candidates" / "layer_norm_honest", str(PROBLEMS / "layer_norm.py"), "bench", 0,
                          PROFILES["h200"])
    assert report["ok"], report.get("error")
    assert [k["name"] for k in report["kernels"]] == ["_layer_norm_rows"]


def test_measurements_are_remembered_across_processes(monkeypatch, tmp_path):
    monkeypatch.setenv("AVO_CACHE_DIR", str(tmp_path))
    first = load("conv2d")
    first.cases("check")  # sized on first use
    assert first.problem.measures.path.is_file() and first.problem.measures.path.is_relative_to(tmp_path)

    def no_measuring(*args, **kwargs):
        raise AssertionError("measured again")

    monkeypatch.setattr(type(first.problem), "measure", no_measuring)
    again = load("conv2d")
    for suite in ("check", "bench", "tiny"):
        assert [(c.name, c.params, c.dtype) for c in again.cases(suite)] == [
            (c.name, c.params, c.dtype) for c in first.cases(suite)]
        case = again.cases(suite)[0]
        assert (again.flops(case), again.bytes(case)) == (first.flops(case), first.bytes(case))
    x = again.make_inputs(again.cases("tiny")[0], 0, "cpu")
    assert again._variant_of(x).sizes == again.cases("tiny")[0].params["sizes"]


def test_the_second_check_size_is_ragged_where_the_file_allows():
    """A kernel that drops the sums of a row's last, partial block must meet a size that is a multiple of 8 but not of
    64 or 128 on the GPU too: 23_Softmax's file size (4096 x 393216) and its three quarters (3072 x 294912) are both
    multiples of every usual block."""
    task = tasks.load(str(Path(__file__).resolve().parents[3] / "examples" / "kernelbench" / "problems"
                          / "23_Softmax.py"))
    second = task.cases("check")[3].params["sizes"]
    assert second == {"batch_size": 3064, "dim": 294904}
    assert all(n % 8 == 0 and n % 64 and n % 128 for n in second.values())
    assert second_sizes({"n": 12, "m": 40}) == [{"n": 12, "m": 24}, {"n": 6, "m": 20}]  # 40 -> 30 -> 24: not of 64
