"""One tuned choice per shape bucket: the table's knobs (`bucket=` in the marker), the kernel's `bucket()` rule read
without running it, acceptance bucket by bucket, and a heuristic evolve over a two-bucket GEMM workload whose buckets
want different tiles. The evaluator is a deterministic fake that times, per case, the table entry the kernel's own
dispatch picks (it runs the kernel's `config()` as the wrapper would): small M wants 32-row tiles, large M 128."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from agent_fakes import evolve as drive, fake_session
from avo.agent.acceptance import bucket_verdict
from avo.agent.buckets import bucket_head_dims, bucket_rule, case_buckets
from avo.agent.heuristic.history import Outcome
from avo.agent.heuristic.knobs import parse_knobs, point_of, render
from avo.agent.heuristic.measured import winning_parts
from avo.agent.heuristic.rules import Shape, fixed_roles, roles, smem_bytes, tile
from avo.agent.heuristic.search import Search, Trial, _required_smem
from avo.agent.session import settle
from avo.cli import main
from avo.report.build import gather
from avo.report.markdown import markdown
from avo.evaluate.result import CaseResult, EvalResult
from avo.tasks.base import Case
from avo.tasks.gemm import GemmTask
from avo.tasks.workload import from_shapes

SEED = '''"""A stand-in GEMM with one tile per shape bucket; the fake evaluator times the entry config() picks."""
SMALL_M = 64

CONFIGS = {
    "small": dict(
        BLOCK_M=64,  # avo: tune 16 32 64 128 256 bucket=small
    ),
    "large": dict(
        BLOCK_M=64,  # avo: tune 16 32 64 128 256 bucket=large
    ),
}


def bucket(M, N, K):
    # Few rows fill few tiles: a short tile keeps more of them busy.
    if M <= SMALL_M:
        return "small"
    return "large"


def config(M, N, K):
    return CONFIGS[bucket(M, N, K)]


def gemm(a, b):
    return a @ b
'''
WANTS = {"small": 32, "large": 128}
# The small cases are 2% of the user's time: a 35% gain there moves the whole fitness by under 1% (the noise floor).
WORKLOAD = from_shapes("gemm", ["M=16,N=256,K=256,weight=0.02", "M=48,N=256,K=256,weight=0.02",
                                "M=2048,N=256,K=256", "M=4096,N=256,K=256"])


def speedup(m: int, block_m: int) -> float:
    want = WANTS["small" if m <= 64 else "large"]
    return math.exp(-0.3 * abs(math.log2(block_m / want)))


def score(folder: Path) -> EvalResult:
    namespace: dict = {}
    exec(compile((folder / "kernel.py").read_text(), "kernel.py", "exec"), namespace)
    cases = []
    for case in GemmTask(WORKLOAD).cases("bench"):
        s = speedup(case.params["M"], namespace["config"](**case.params)["BLOCK_M"])
        cases.append(CaseResult(case=case.name, suite="bench", correct=True, ms=1 / s, library_ms=1.0, speedup=s,
                                spread=0.0, library_spread=0.0, weight=case.weight))
    result = EvalResult(status="correct", cases=cases, timing_source="interpreter", device="cpu")
    result.fitness = result.weighted_fitness()
    return result


class TableEvaluator:
    def evaluate(self, candidate_dir: Path) -> EvalResult:
        return score(Path(candidate_dir))

    def confirm(self, candidate_dir: Path, incumbent_dir: Path) -> tuple[EvalResult, EvalResult]:
        return score(Path(candidate_dir)), score(Path(incumbent_dir))


def test_table_knobs_name_their_bucket_and_edit_one_line():
    knobs = parse_knobs(SEED)
    assert [(k.name, k.base, k.bucket, k.value) for k in knobs] == [
        ("BLOCK_M@small", "BLOCK_M", "small", 64), ("BLOCK_M@large", "BLOCK_M", "large", 64)]
    assert knobs[0].choices == (16, 32, 64, 128, 256)
    edited = render(SEED, {"BLOCK_M@large": 128})
    assert [line for line in edited.splitlines() if line not in SEED.splitlines()] == \
        ["        BLOCK_M=128,  # avo: tune 16 32 64 128 256 bucket=large"]


def test_the_bucket_rule_is_read_not_run():
    cases = [Case(c.name, c.params) for c in GemmTask(WORKLOAD).cases("bench")]
    assert list(case_buckets(SEED, cases).values()) == ["small", "small", "large", "large"]
    assert bucket_rule("def bucket(S, D):\n    return 'short' if S * D < 1 << 16 else 'long'\n")(
        {"S": 100, "D": 64, "B": 2}) == "short"
    # Anything outside the subset (a call, an attribute, an import) reads as no rule, and is never executed.
    for body in ("return open('x').read()", "import os\n    return 'a'", "return M.bit_length()"):
        assert case_buckets(f"def bucket(M, N, K):\n    {body}\n", cases) == {}
    assert bucket_rule("X = 1\n") is None


def result_of(speedups: dict[str, float], buckets: dict[str, str]) -> EvalResult:
    cases = [CaseResult(case=name, suite="bench", speedup=s, bucket=buckets[name], spread=0.0, library_spread=0.0)
             for name, s in speedups.items()]
    return EvalResult(status="correct", cases=cases, fitness=EvalResult(status="correct",
                                                                        cases=cases).weighted_fitness())


def test_acceptance_weighs_each_bucket_against_its_own_noise():
    where = {"a": "small", "b": "small", "c": "large", "d": "large"}
    best = result_of({"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0}, where)
    mixed = result_of({"a": 1.3, "b": 1.3, "c": 0.9, "d": 0.9}, where)
    kind, why = bucket_verdict(mixed, best)
    assert kind == "mixed" and "small +30.0%" in why and "large -10.0%" in why
    assert bucket_verdict(result_of({"a": 1.2, "b": 1.2, "c": 1.0, "d": 1.0}, where), best)[0] == "gain"
    assert bucket_verdict(result_of({"a": 1.005, "b": 1.0, "c": 1.0, "d": 1.0}, where), best) is None
    assert bucket_verdict(result_of({"a": 2.0, "b": 1.0}, {"a": "x", "b": "x"}),
                          result_of({"a": 1.0, "b": 1.0}, {"a": "x", "b": "x"})) is None  # one bucket: no table


def test_the_winning_part_of_a_mixed_move_is_tried_alone():
    knobs = parse_knobs(SEED)
    seed = point_of(knobs)
    both = {"BLOCK_M@small": 128, "BLOCK_M@large": 128}
    outcomes = [Outcome("c0", seed, "correct", 1.0, True),
                Outcome("c1", both, "correct", 1.0, False, buckets={"small": [0.8, 1.0], "large": [1.35, 1.0]})]
    parts = winning_parts(outcomes, knobs)
    assert parts == [({"BLOCK_M@large": 128}, "large", pytest.approx(0.35))]
    search = Search(knobs=knobs, shape=Shape(kind="gemm", roles=roles(knobs)), incumbent=seed, splits=parts)
    search.record(Trial(point=both, status="correct", fitness=1.0))
    move = search.next_move()
    assert (move.kind, move.point) == ("split", {"BLOCK_M@small": 64, "BLOCK_M@large": 128})


def evolve_table(tmp_path: Path, monkeypatch, text: str, max_candidates: int):
    """A heuristic evolve of the seed `text` over WORKLOAD, scored by the fake table evaluator; the finished run."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "kernel.py").write_text(text)
    flags = {"agent.kind": "heuristic", "budget.max_candidates": max_candidates,
             "evaluation.workload": WORKLOAD.model_dump(mode="json")}
    session, run, lines = fake_session(tmp_path, evaluator=TableEvaluator(), task=GemmTask(WORKLOAD), seed=seed,
                                       flags=flags)
    done = drive(session, run, lines)
    assert done.code == 0, done.out
    return done


def test_an_evolve_over_two_buckets_ends_with_each_buckets_own_tile(tmp_path, monkeypatch, capsys):
    done = evolve_table(tmp_path, monkeypatch, SEED, max_candidates=30)
    best = done.run.lineage.best
    done.run.lineage.checkout(best, tmp_path / "best")
    best_point = point_of(parse_knobs((tmp_path / "best" / "kernel.py").read_text()))
    assert best_point == {"BLOCK_M@small": 32, "BLOCK_M@large": 128}
    best_result = done.run.load_eval(best)
    assert [c.bucket for c in best_result.cases] == ["small", "small", "large", "large"]
    # The small bucket's tile was accepted on its own cases: on the whole fitness its gain is under the noise.
    single = max(score_point(tmp_path, {"BLOCK_M@small": v, "BLOCK_M@large": v}) for v in (16, 32, 64, 128, 256))
    assert best_result.fitness > single
    small_only = score_point(tmp_path, {"BLOCK_M@small": 32, "BLOCK_M@large": 128})
    large_only = score_point(tmp_path, {"BLOCK_M@small": 64, "BLOCK_M@large": 128})
    assert small_only / large_only - 1 < 0.01
    assert_the_run_names_its_workload(done.run, tmp_path, capsys)


UNUSED = SEED.replace('''    "large": dict(
        BLOCK_M=64,  # avo: tune 16 32 64 128 256 bucket=large
    ),
''', '''    "large": dict(
        BLOCK_M=64,  # avo: tune 16 32 64 128 256 bucket=large
    ),
    "huge": dict(
        BLOCK_M=64,  # avo: tune 16 32 64 128 256 bucket=huge
    ),
''').replace('''    return "large"
''', '''    if M >= 1 << 20:
        return "huge"
    return "large"
''')


def test_an_entry_no_timed_case_takes_is_left_as_it_is(tmp_path, monkeypatch):
    # The workload's cases never take `huge`: a move of its tile cannot change the fitness, so none is made.
    assert "bucket=huge" in UNUSED and 'return "huge"' in UNUSED
    done = evolve_table(tmp_path, monkeypatch, UNUSED, max_candidates=12)
    lineage = done.run.lineage
    baseline = done.run.load_eval(lineage.baseline)
    assert [c.bucket for c in baseline.bench_cases()] == ["small", "small", "large", "large"]
    points = []
    for cid in lineage.cids()[1:]:
        lineage.checkout(cid, tmp_path / cid)
        points.append(point_of(parse_knobs((tmp_path / cid / "kernel.py").read_text())))
    assert len(points) >= 5
    assert all(p["BLOCK_M@huge"] == 64 for p in points), points
    assert {p["BLOCK_M@small"] for p in points} != {64} and {p["BLOCK_M@large"] for p in points} != {64}


def assert_the_run_names_its_workload(run, tmp_path: Path, capsys) -> None:
    """run.json records it, --resume keeps it, show and the report name it, the model saw it and the buckets."""
    recorded = json.loads((run.path / "run.json").read_text())["config"]["evaluation"]["workload"]
    assert recorded == WORKLOAD.model_dump(mode="json")
    resumed = settle({"runs_dir": str(tmp_path / "runs"), "budget.max_candidates": 40}, None, run.id)
    assert resumed.config.evaluation.workload == WORKLOAD
    capsys.readouterr()
    assert main(["show", run.id, "--runs-dir", str(tmp_path / "runs")]) == 0
    assert "workload shapes: 4 gemm cases, weighted from --shapes" in capsys.readouterr().out
    assert "| workload | shapes: 4 gemm cases, weighted from --shapes" in markdown(gather(run), run.lineage)
    transcript = (run.path / "transcript.jsonl").read_text()
    assert "- 16x256x256: M=16 N=256 K=256 bfloat16, weight 1%" in transcript  # the system prompt
    assert "bucket small: fitness" in transcript and "bucket large" in transcript  # evaluate results


def score_point(tmp_path: Path, point: dict) -> float:
    folder = tmp_path / "scored"
    folder.mkdir(exist_ok=True)
    (folder / "kernel.py").write_text(render(SEED, point))
    return score(folder).fitness


FA3 = Path(__file__).resolve().parents[2] / "kernels" / "attention" / "cuda_fa3" / "kernel.py"


def test_a_shared_knob_must_fit_beside_every_timed_entry():
    """The CUDA attention seed's STAGES serves every table entry: 3 stages fit beside a d64 entry's 128-wide K/V
    tiles but not the shared 192-wide ones, so no move pairing STAGES 3 with a d64 entry's knob is offered (read as
    the d64 entry alone, it looked as if it fit: on the H200 seven such candidates crashed in one evolve)."""
    text = FA3.read_text()
    knobs = parse_knobs(text)
    seed = point_of(knobs)
    assert (seed["BLOCK_N"], seed["STAGES"], seed["BLOCK_N@d64"]) == (192, 2, 128)
    shape = Shape(kind="attention", roles=roles(knobs), smem_limit=227 * 1024, fixed=fixed_roles(text, knobs))
    dims = bucket_head_dims(text)
    search = Search(knobs=knobs, shape=shape, incumbent=seed,
                    buckets=["d128", "d128_short", "d128_mid", "d64", "d64_short", "d64_short_causal"], head_dims=dims)
    offered = [m.point for m in search._singles() + search._pairs()]
    assert offered and not [p for p in offered if p["STAGES"] == 3 and p["BLOCK_N"] == 192]
    # Beside 128-wide shared tiles it fits, and is offered, once no entry stages O for a TMA store or keeps a second
    # Q tile (each takes shared memory as a K/V stage does: 256 KB at D = 128 with either).
    staging = ("d128_short", "d128_mid", "d64_short", "d64_short_causal")
    plain = dict(seed, BLOCK_N=128, **{f"{knob}@{entry}": value for entry in staging
                                       for knob, value in (("O_TMA", False), ("Q_BUFFERS", 1))})
    narrower = Search(knobs=knobs, shape=shape, incumbent=plain, buckets=search.buckets, head_dims=dims)
    assert {"STAGES": 3} in [{k: v for k, v in m.point.items() if plain[k] != v} for m in narrower._singles()]
    staged = Search(knobs=knobs, shape=shape, incumbent=dict(plain, **{"O_TMA@d128_short": True}),
                    buckets=search.buckets, head_dims=dims)
    assert {"STAGES": 3} not in [{k: v for k, v in m.point.items() if staged.incumbent[k] != v}
                                 for m in staged._singles()]
    # The seed's own refusal says how much it needed: that calibrates the model as the compiler's count does.
    message = ("case b1_h32-8_s4096_d128_causal raised: ValueError: BLOCK_N=192, STAGES=3 with 2 consumer "
               "warpgroups need 329728 bytes of shared memory at D=128: over 232448")
    assert _required_smem(message) == (329728, 232448)


def test_each_attention_entry_is_read_at_its_own_head_dim_and_consumer_count():
    """The CUDA attention seed's entries, read as the heuristic reads them: a D 64 entry at head dim 64 (the kernel's
    rule says which dims reach it), a tuned WARPGROUPS as that many 64-row consumer tiles, and the shared memory
    the model counts for each entry's point is what kernel.py asks for (less its 2 KB of alignment and barriers)."""
    from avo.evaluate.worker.loader import load_entry

    text = FA3.read_text()
    knobs = parse_knobs(text)
    dims = bucket_head_dims(text)
    assert dims == {"d128": 128, "d128_short": 128, "d128_mid": 128, "d64": 64, "d64_short": 64,
                    "d64_short_causal": 64}
    assert bucket_head_dims("def bucket(S):\n    return 'x' if S < 7 else 1\n") == {}  # a rule that fails reads as none
    shape = Shape(kind="attention", roles=roles(knobs), smem_limit=227 * 1024, fixed=fixed_roles(text, knobs))
    search = Search(knobs=knobs, shape=shape, incumbent=point_of(knobs), buckets=sorted(dims), head_dims=dims)
    plans = load_entry(FA3.parent, "attention").__globals__["PLANS"]
    for name in dims:
        read = search.bucket_shape(name)
        build = plans[name].build
        assert read.head_dim == build.d, name
        assert tile(read, search.incumbent)[0] == build.block_m, name
        assert smem_bytes(read, search.incumbent) == build.smem - 2048, name
    # The whole kernel keeps its own consumer count: one entry's WARPGROUPS sizes no other entry's tile.
    assert tile(shape, search.incumbent)[0] == 128


SHARED = SEED.replace('SMALL_M = 64\n', 'SMALL_M = 64\nGROUP_M = 8  # avo: tune 4 8 16\n')


def _folders(tmp_path: Path, best_text: str, candidate_text: str, extra: str | None = None) -> tuple[Path, Path]:
    best, candidate = tmp_path / "best", tmp_path / "candidate"
    for folder, text in ((best, best_text), (candidate, candidate_text)):
        folder.mkdir(parents=True)
        (folder / "kernel.py").write_text(text)
        (folder / "notes.txt").write_text("same")
    if extra is not None:
        (candidate / "notes.txt").write_text(extra)
    return best, candidate


@pytest.mark.parametrize("candidate, shared", [
    (render(SHARED, {"GROUP_M": 16}), True),  # a knob every bucket shares
    (render(SHARED, {"BLOCK_M@large": 128}), False),  # a table entry: its bucket's part can be tried alone
    (render(SHARED, {"GROUP_M": 16, "BLOCK_M@small": 32}), False),
    (SHARED, False),  # nothing moved
    (render(SHARED, {"GROUP_M": 16}).replace("return a @ b", "return b @ a"), False),  # code beside the knob
])
def test_only_a_move_of_shared_knobs_has_no_part_to_try_alone(tmp_path, candidate, shared):
    from avo.agent.acceptance import moves_only_shared_knobs

    best, folder = _folders(tmp_path, SHARED, candidate)
    assert moves_only_shared_knobs(folder, best) is shared
    assert not moves_only_shared_knobs(*reversed(_folders(tmp_path / "x", SHARED, candidate, extra="other")))


@pytest.mark.parametrize("move, accepted", [({"GROUP_M": 16}, True), ({"BLOCK_M@large": 128}, False)])
def test_a_mixed_move_of_shared_knobs_is_decided_by_the_geomean(tmp_path, move, accepted):
    """Small cases +30%, large -10% (geomean +8%): a table entry's move is refused (its winning part goes alone); a
    shared knob's has no part to try alone, so the geomean decides and the side-by-side re-run confirms it."""
    import shutil
    from types import SimpleNamespace

    from avo.agent.acceptance import decide

    where = {"a": "small", "b": "small", "c": "large", "d": "large"}
    best_result = result_of({"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0}, where)
    mixed = result_of({"a": 1.3, "b": 1.3, "c": 0.9, "d": 0.9}, where)
    best, candidate = _folders(tmp_path, SHARED, render(SHARED, move))

    class Evaluator:
        def confirm(self, candidate_dir, incumbent_dir):
            return mixed, best_result

    run = SimpleNamespace(load_eval=lambda cid: best_result, append_event=lambda kind, **fields: None)
    ctx = SimpleNamespace(run=run, evaluator=Evaluator(), state=SimpleNamespace(last_confirm=None),
                          workspace=candidate, lineage=SimpleNamespace(
                              best="c0001", checkout=lambda cid, dest: shutil.copytree(best, dest, dirs_exist_ok=True)))
    ok, why = decide(ctx, "c0002", mixed, candidate)
    assert ok is accepted, why
    assert ("small +30.0%" in why) is not accepted


def test_the_gemm_seeds_few_token_entry_is_read_as_its_64_row_tile():
    """The CUDA GEMM seed's few-token tiles are 64 rows (FEW's BLOCK_M, one choice): the search reads that entry with
    them, so its 7 stages of 64 x 128 fit, where read with the shared BLOCK_M (128) they would need 256 KB."""
    from avo.agent.heuristic.rules import infeasible

    text = (Path(__file__).resolve().parents[2] / "kernels" / "gemm" / "cuda_wgmma" / "kernel.py").read_text()
    knobs = parse_knobs(text)
    seed = point_of(knobs)
    search = Search(knobs=knobs, shape=Shape(kind="gemm", roles=roles(knobs), fixed=fixed_roles(text, knobs)),
                    incumbent=seed, incumbent_fitness=1.0)
    few = search.bucket_shape("few")
    assert few.roles["bm"] == "BLOCK_M@few" and tile(few, seed)[:2] == (64, 128) and tile(few, seed)[4] == 7
    assert infeasible(few, seed, None) is None and smem_bytes(few, seed) < 227 * 1024
    assert search.shape.roles["bm"] == "BLOCK_M"  # the whole kernel's reading keeps the shared knob
    assert not [k for k in knobs if k.name == "BLOCK_M@few"][0].neighbours(64)  # never moved
