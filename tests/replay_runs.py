"""Runs shared by tests: the replay and report tests, and the ones that compare a run with one on a single worker.

`tiny_real_run` is a real `avo evolve` under the Triton interpreter (heuristic agent, 2 candidates), and
`untimed_single_worker_run` one with timing off (4 candidates), each built once per test process and shared, because
they take tens of seconds. `gpu_shaped_run` is assembled from the run and lineage
APIs with a transcript in the shape the agent loop writes, covering what the tiny run does not: GPU timings, several
accepted steps, failures with rules, supervisor and context-reset events, token usage and cost.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from lineage_fakes import result, write_candidate

from avo.cli import main
from avo.config import RunConfig
from avo.run.directory import Run

REPO = Path(__file__).resolve().parents[1]
_BUILT: dict[str, Path] = {}
FAST_EVAL = "evaluation:\n  warmup_ms: 1\n  rep_ms: 5\n  input_sets: 1\n"


def tiny_real_run(root: Path) -> tuple[Path, str]:
    """(runs dir, run id) of a finished interpreter run: baseline c0000 and two candidates."""
    if "tiny" not in _BUILT:
        runs = Path(root) / "runs"
        config = Path(root) / "fast.yaml"
        config.write_text(FAST_EVAL)
        code = main(["evolve", "--config", str(config), "--kernel", "gemm", "--device", "interpret", "--gpu", "h200",
                     "--max-candidates", "2", "--agent", "heuristic", "--runs-dir", str(runs), "--quiet"])
        assert code == 0, f"avo evolve exited {code}"
        _BUILT["tiny"] = runs
    runs = _BUILT["tiny"]
    return runs, Run.open("latest", runs).id


def untimed_single_worker_run(root: Path) -> Path:
    """The runs dir of `avo evolve --agent heuristic --max-candidates 4` under the interpreter with timing off
    (`evaluation.bench_suite: ""`), on one worker: every fitness is 0, so what the agent tries depends only on what it
    has tried, and a run on two workers or on a Ray cluster must try exactly these candidates."""
    if "untimed" not in _BUILT:
        runs, config = Path(root) / "runs", Path(root) / "untimed.json"
        config.write_text(json.dumps({"evaluation": {"bench_suite": ""}}))
        env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
        done = subprocess.run([sys.executable, "-m", "avo", "evolve", "--kernel", "gemm", "--device", "interpret",
                               "--agent", "heuristic", "--runs-dir", str(runs), "--quiet", "--config", str(config),
                               "--max-candidates", "4"], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        _BUILT["untimed"] = runs
    return _BUILT["untimed"]


def copy_run(runs: Path, run_id: str, dest_runs: Path) -> Path:
    """A private copy of a shared run, for tests that write into it."""
    dest_runs.mkdir(parents=True, exist_ok=True)
    shutil.copytree(runs / run_id, dest_runs / run_id)
    return dest_runs


def _turn(run: Run, text: str, calls: list[tuple[str, dict, str, dict | None]], *, elapsed: float, n: int,
          tokens: tuple[int, int] = (0, 0), cost: float = 0.0, total_cost: float = 0.0) -> None:
    ids = [f"t{n}_{i}" for i in range(len(calls))]
    progress = {"elapsed_s": elapsed, "cost_usd_total": total_cost, "candidates": 0, "since_improvement": 0}
    run.append_event("model_turn", text=text, model="claude-sonnet-test",
                     tool_calls=[{"id": i, "name": c[0], "arguments": c[1], "raw_arguments": None}
                                 for i, c in zip(ids, calls)],
                     usage={"input_tokens": tokens[0], "output_tokens": tokens[1], "cache_read_tokens": 0,
                            "cache_write_tokens": 0}, cost_usd=cost, stop_reason="tool_use", duration_s=1.0,
                     **progress)
    for i, (name, args, content, data) in zip(ids, calls):
        run.append_event("tool_call", id=i, name=name, arguments=args, raw_arguments=None)
        run.append_event("tool_result", id=i, name=name, content=content, is_error=False, data=data,
                         workspace_parent=None, **progress)


def _evaluate(run: Run, src: Path, kernel: str, parent: str, res, rationale: str, accept: bool) -> tuple[str, dict]:
    write_candidate(src, kernel)
    lineage = run.lineage
    cid = lineage.commit(src, parent=parent, result=res, model="claude-sonnet-test", rationale=rationale)
    run.save_eval(cid, res)
    if accept:
        lineage.accept(cid)
    best = lineage.best
    data = {"cid": cid, "parent": parent, "status": res.status, "rule": res.rule, "message": res.message,
            "fitness": res.fitness, "accepted": accept, "verdict": "accepted" if accept else "not accepted",
            "best_cid": best, "best_fitness": lineage.info(best).fitness, "duplicate_of": None,
            "suspicious": False, "timing_source": res.timing_source,
            "cases": [c.model_dump(mode="json") for c in res.cases]}
    return cid, data


def gpu_shaped_run(runs: Path, run_id: str = "gpu-shaped") -> Run:
    """Baseline c0000 (0.70), c0001 rejected, c0002 accepted (0.85), c0003 incorrect, c0004 accepted (0.93)."""
    config = RunConfig(kernel="gemm", device="cuda", gpu="h200")
    config.budget.hours = 2.0
    run = Run.create(config, runs_dir=runs, gpu="h200", agent="anthropic:claude-sonnet-test", run_id=run_id)
    src = runs.parent / f"{run_id}-src"
    lineage = run.lineage
    with run.lock():
        write_candidate(src, "BLOCK_M = 64\nNUM_WARPS = 4\n")
        base = result(fitness=0.70, tflops=490)
        lineage.commit(src, parent=None, result=base, model="seed", rationale="baseline: the seed kernel")
        run.save_eval("c0000", base)
        lineage.tag_baseline("c0000")
        lineage.accept("c0000")
        run.append_event("baseline", cid="c0000", seed="kernels/gemm/triton_tiled", summary=base.summary(),
                         status="correct", fitness=0.70, workspace_parent="c0000")
        run.append_event("session", agent="anthropic", resumed=False, system_prompt="...", tools=["read_file"])
        _turn(run, "Look at the seed and its profile first.",
              [("read_file", {"path": "kernel.py"}, "kernel.py (2 lines):\nBLOCK_M = 64", None),
               ("profile", {"case": 0}, "tensor pipe 41% of peak", {"sm_pct": 41})],
              elapsed=30, n=1, tokens=(12000, 300), cost=0.04, total_cost=0.04)
        cid, data = _evaluate(run, src, "import torch\nBLOCK_M = 64\n", "c0000",
                              result("rejected", rule="static.library_call",
                                     message="kernel.py:3 calls torch.matmul"), "call the library", False)
        _turn(run, "Try the library path.", [("evaluate", {"rationale": "call the library"}, f"{cid}: rejected",
                                               data)], elapsed=90, n=2, tokens=(14000, 200), cost=0.05,
              total_cost=0.09)
        cid, data = _evaluate(run, src, "BLOCK_M = 128\nNUM_WARPS = 8\n", "c0000", result(fitness=0.85, tflops=595),
                              "BLOCK_M 64 -> 128 with 8 warps: more reuse per tile", True)
        _turn(run, "Bigger tiles: more reuse of each loaded tile.",
              [("edit_file", {"path": "kernel.py", "old": "BLOCK_M = 64", "new": "BLOCK_M = 128"}, "edited", None),
               ("evaluate", {"rationale": "BLOCK_M 64 -> 128 with 8 warps"}, f"{cid}: accepted", data)],
              elapsed=400, n=3, tokens=(16000, 500), cost=0.06, total_cost=0.15)
        run.append_event("supervisor", text="Stalled on tile sizes: try more pipeline stages.", elapsed_s=450)
        cid, data = _evaluate(run, src, "BLOCK_M = 256\nNUM_WARPS = 8\n", "c0002",
                              result("incorrect", message="case 8192x8192x8192 relative error 0.4 > 0.01"),
                              "BLOCK_M 256", False)
        _turn(run, "Even bigger.", [("evaluate", {"rationale": "BLOCK_M 256"}, f"{cid}: incorrect", data)],
              elapsed=800, n=4, tokens=(18000, 150), cost=0.06, total_cost=0.21)
        run.append_event("context_reset", reason="The conversation reached about 150000 tokens", summary="...",
                         elapsed_s=900, cost_usd_total=0.21, candidates=3, since_improvement=1)
        cid, data = _evaluate(run, src, "BLOCK_M = 128\nNUM_WARPS = 8\nNUM_STAGES = 4\n", "c0002",
                              result(fitness=0.93, tflops=650), "NUM_STAGES 3 -> 4: hide load latency", True)
        _turn(run, "More stages to hide global-memory latency.",
              [("note", {"text": "stages help"}, "noted", {"chars": 11}),
               ("evaluate", {"rationale": "NUM_STAGES 3 -> 4"}, f"{cid}: accepted", data)],
              elapsed=1500, n=5, tokens=(9000, 400), cost=0.03, total_cost=0.24)
        _turn(run, "Done for now.", [], elapsed=1510, n=6, tokens=(9500, 20), cost=0.03, total_cost=0.27)
        run.append_event("stop", state="finished", reason="cost budget of $0.25 spent", elapsed_s=1511,
                         cost_usd_total=0.27, candidates=4, since_improvement=0)
        run.set_state("finished", reason="cost budget of $0.25 spent")
    return run
