"""Workloads: the three forms build the cases they should (model configs against hand counts), the task times them
instead of its bench suite and checks their heads, fitness weighs them, and bad input is one line with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from avo import tasks
from avo.cli import main
from avo.config import EvalConfig
from avo.errors import UserError
from avo.evaluate.result import CaseResult, EvalResult, geomean
from avo.tasks.workload import Workload, from_file, from_flags, from_model, from_shapes

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"

# Counted by hand from the published configs: (Hq, Hkv, D, hidden, intermediate).
HAND = {
    "llama-3-8b": (32, 8, 128, 4096, 14336),
    "llama-3-70b": (64, 8, 128, 8192, 28672),
    "qwen2.5-7b": (28, 4, 128, 3584, 18944),
    "mistral-7b": (32, 8, 128, 4096, 14336),
    "llama-3.2-1b": (32, 8, 64, 2048, 8192),
}
LAYERS = {  # (N, K) of qkv, o, gate_up, down, by hand
    "llama-3-8b": [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)],
    "llama-3-70b": [(10240, 8192), (8192, 8192), (57344, 8192), (8192, 28672)],
    "qwen2.5-7b": [(4608, 3584), (3584, 3584), (37888, 3584), (3584, 18944)],
    "mistral-7b": [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)],
    "llama-3.2-1b": [(3072, 2048), (2048, 2048), (16384, 2048), (2048, 8192)],
}


def test_shapes_give_attention_and_gemm_cases_with_weights_and_dtypes():
    w = from_shapes("attention", ["B=8,Hq=32,Hkv=8,S=2048,D=128,causal", "Hq=16,S=100,D=64,fp16,weight=3"])
    first, second = w.bench_cases()
    assert (first.name, first.params["B"], first.params["Hkv"], first.params["causal"], first.weight) == \
        ("b8_h32-8_s2048_d128_causal", 8, 8, True, 1.0)
    assert (second.name, second.params["B"], second.params["Hkv"], second.params["causal"]) == \
        ("b1_h16-16_s100_d64_fp16", 1, 16, False)
    assert (second.dtype, second.weight) == ("float16", 3.0)
    g = from_shapes("gemm", ["M=512,N=6144,K=4096"]).bench_cases()
    assert [(c.name, c.params, c.dtype) for c in g] == [("512x6144x4096", {"M": 512, "N": 6144, "K": 4096},
                                                        "bfloat16")]


def test_workload_file_takes_mappings_and_shape_strings(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("name: my-model\ncases:\n  - {M: 16, N: 32, K: 8, weight: 2}\n  - M=64,N=32,K=8,fp16\n")
    w = from_file("gemm", path)
    assert w.name == "my-model" and w.source == "mine.yaml"
    assert [(c.name, c.weight) for c in w.bench_cases()] == [("16x32x8", 2.0), ("64x32x8_fp16", 1.0)]


@pytest.mark.parametrize("model", sorted(HAND))
def test_model_configs_derive_the_hand_counted_shapes(model):
    hq, hkv, d, hidden, inter = HAND[model]
    config = MODELS / f"{model}.json"
    attention = from_model("attention", config, "2048,8192", batch=2).bench_cases()
    assert [c.params for c in attention] == [
        {"B": 2, "Hq": hq, "Hkv": hkv, "S": s, "D": d, "causal": True, "magnitude": 1.0} for s in (2048, 8192)]
    gemm = from_model("gemm", config, "512,4096").bench_cases()
    assert [(c.params["M"], c.params["N"], c.params["K"]) for c in gemm] == \
        [(m, n, k) for m in (512, 4096) for n, k in LAYERS[model]]
    assert gemm[0].name == f"qkv_512x{LAYERS[model][0][0]}x{hidden}" and gemm[3].name.startswith("down_")
    assert LAYERS[model][2] == (2 * inter, hidden)  # the table above is consistent with the config's numbers


def test_head_dim_field_wins_over_hidden_over_heads(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
                                "hidden_size": 2048 + 512, "intermediate_size": 8192}))
    (case,) = from_model("attention", path, "1024").bench_cases()
    assert (case.params["D"], case.params["Hkv"], case.params["B"]) == (64, 4, 1)


def test_the_task_times_the_workload_and_checks_its_heads():
    w = from_shapes("attention", ["B=2,Hq=32,Hkv=4,S=4096,D=64,causal", "B=2,Hq=32,Hkv=4,S=8192,D=64,causal"])
    task = tasks.load("attention", w)
    assert [c.name for c in task.cases("bench")] == [c.name for c in w.bench_cases()]
    builtin = tasks.load("attention").cases("check")
    added = task.cases("check")[len(builtin):]
    assert [c.name for c in task.cases("check")[:len(builtin)]] == [c.name for c in builtin]
    assert [(c.params["Hq"], c.params["Hkv"], c.params["D"], c.params["S"]) for c in added] == [(32, 4, 64, 257)]
    assert task.cases("tiny") == tasks.load("attention").cases("tiny")
    gemm = tasks.load("gemm", from_shapes("gemm", ["M=4096,N=6144,K=4096"]))
    assert gemm.cases("check")[-1].params == {"M": 77, "N": 6144, "K": 4096}


def test_equal_weights_give_exactly_the_plain_geometric_mean_and_weights_count():
    speedups = [0.7, 1.3, 0.91, 1.07]
    plain = geomean(speedups)
    for w in (1.0, 0.25, 3.0):
        cases = [CaseResult(case=f"c{i}", suite="bench", speedup=s, weight=w) for i, s in enumerate(speedups)]
        assert EvalResult(status="correct", cases=cases).weighted_fitness() == plain
    cases = [CaseResult(case="a", suite="bench", speedup=2.0, weight=3.0),
             CaseResult(case="b", suite="bench", speedup=0.5, weight=1.0)]
    assert EvalResult(status="correct", cases=cases).weighted_fitness() == pytest.approx(2.0 ** 0.5)


def test_the_workload_travels_in_the_evaluator_config_and_back():
    w = from_shapes("gemm", ["M=16,N=32,K=8,weight=2"])
    config = EvalConfig.model_validate(EvalConfig(workload=w).model_dump(mode="json"))
    assert isinstance(config.workload, Workload) and config.workload == w


def test_one_form_at_a_time():
    with pytest.raises(UserError, match="use one of"):
        from_flags("gemm", shapes=["M=1,N=1,K=1"], workload="w.yaml")
    with pytest.raises(UserError, match="--tokens goes with --model"):
        from_flags("gemm", tokens="128")


def avo(capsys, *args) -> tuple[int, str]:
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


def no_fields(tmp_path: Path) -> Path:
    path = tmp_path / "nofields.json"
    path.write_text(json.dumps({"hidden_size": 4096, "num_key_value_heads": 8}))
    return path


def file_with(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    return path


BAD = [
    ("unknown key", "attention", ["--shapes", "Hq=8,S=64,D=64,X=3"], "unknown key 'X'"),
    ("missing key", "attention", ["--shapes", "Hq=8,D=64"], "missing S"),
    ("missing gemm key", "gemm", ["--shapes", "M=8,N=8"], "missing K"),
    ("head dim 96", "attention", ["--shapes", "Hq=8,S=64,D=96"], "D = 96"),
    ("ragged groups", "attention", ["--shapes", "Hq=8,Hkv=3,S=64,D=64"], "not a multiple of Hkv"),
    ("S = 0", "attention", ["--shapes", "Hq=8,S=0,D=64"], "S = 0"),
    ("negative size", "gemm", ["--shapes", "M=-4,N=8,K=8"], "M = -4"),
    ("not a number", "gemm", ["--shapes", "M=big,N=8,K=8"], "not an integer"),
    ("bad weight", "gemm", ["--shapes", "M=4,N=8,K=8,weight=0"], "weight must be a positive"),
    ("bad dtype", "gemm", ["--shapes", "M=4,N=8,K=8,dtype=int8"], "dtype 'int8'"),
    ("config without fields", "gemm", ["--model", no_fields, "--tokens", "128"], "no num_attention_heads"),
    ("config missing", "gemm", ["--model", lambda t: t / "absent.json", "--tokens", "128"], "not found"),
    ("no tokens", "attention", ["--model", MODELS / "llama-3-8b.json"], "needs --tokens"),
    ("zero tokens", "attention", ["--model", MODELS / "llama-3-8b.json", "--tokens", "0"], "at least 1"),
    ("empty workload", "gemm", ["--workload", lambda t: file_with(t, "name: x\ncases: []\n")], "holds no cases"),
    ("malformed YAML", "gemm", ["--workload", lambda t: file_with(t, "cases: [M: 1, N\n")], "not valid YAML"),
    ("bad case in a file", "gemm", ["--workload", lambda t: file_with(t, "cases:\n  - {M: 1, N: 2}\n")],
     "case 1: missing K"),
]


@pytest.mark.parametrize("command", ["evolve", "bench"])
@pytest.mark.parametrize("what,kernel,flags,says", BAD, ids=[b[0] for b in BAD])
def test_bad_workload_input_is_one_line_and_exit_2(capsys, tmp_path, command, what, kernel, flags, says):
    flags = [f(tmp_path) if callable(f) else f for f in flags]
    where = ["--runs-dir", tmp_path / "runs"] if command == "evolve" else \
        [Path(__file__).resolve().parents[1] / "evaluate" / "kernels" / "good_gemm"]
    code, err = avo(capsys, command, *where, "--kernel", kernel, "--device", "interpret", *flags)
    assert code == 2, err
    assert err.startswith("avo: error: ") and err.strip().count("\n") == 0, err
    assert says in err
    assert not (tmp_path / "runs").exists()


def test_a_task_file_brings_its_own_shapes(capsys, tmp_path):
    code, err = avo(capsys, "evolve", "--kernel", tmp_path / "problem.py", "--shapes", "M=1,N=1,K=1",
                    "--runs-dir", tmp_path / "runs")
    assert code == 2 and "goes with --kernel attention or gemm" in err


def test_a_resumed_run_keeps_its_workload(capsys, tmp_path):
    code, err = avo(capsys, "evolve", "--resume", "latest", "--runs-dir", tmp_path, "--shapes", "M=1,N=1,K=1")
    assert code == 2 and "keeps its workload" in err


def test_profile_takes_a_timed_case_by_name_and_profiles_the_workloads_cases():
    from avo.agent.tools.base import ToolError
    from avo.agent.tools.profile import case_index
    from avo.profile.ncu import ncu_command, pick_case

    w = from_shapes("gemm", ["M=16,N=32,K=8", "M=64,N=32,K=8"])
    assert case_index("gemm", w, "64x32x8") == 1 and case_index("gemm", None, 2) == 2
    with pytest.raises(ToolError, match="16x32x8, 64x32x8"):
        case_index("gemm", w, "4096x4096x4096")
    assert pick_case("gemm", "bench", 1, w)[1].name == "64x32x8"
    cmd = ncu_command("ncu", candidate=Path("c"), task_spec="gemm", suite="bench", case_index=1, log=Path("l"),
                      status=Path("s"), metrics=[], workload_file=Path("w.json"))
    assert cmd[-2:] == ["--workload", "w.json"]
