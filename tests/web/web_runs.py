"""Runs for the web-view tests: one whose candidate carries script payloads in every field a model writes."""

from __future__ import annotations

from pathlib import Path

from lineage_fakes import result, write_candidate

from avo.config import RunConfig
from avo.run.directory import Run

PAYLOAD = ('</script><script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">'
           '<svg onload="window.__xss = 3"></svg>"\'><b id="injected">bold</b>')
EXAMPLES = Path(__file__).resolve().parents[2] / "runs" / "examples"
ATTENTION = "20261130-004738-attention"
"""The run inside runs/examples/attention-from-naive-h200.avo.tar."""


def xss_run(runs: Path, run_id: str = "xss") -> Run:
    """c0000 the seed; c0001 rejected, with PAYLOAD in its source, rationale, message, turn text and tool output."""
    run = Run.create(RunConfig(kernel="gemm", device="cuda", gpu="h200"), runs_dir=runs, gpu="h200",
                     agent=f"heuristic{PAYLOAD}", run_id=run_id)
    src = runs.parent / f"{run_id}-src"
    with run.lock():
        lineage = run.lineage
        write_candidate(src, "BLOCK_M = 64\n")
        base = result(fitness=0.5)
        lineage.commit(src, parent=None, result=base, model="seed", rationale="baseline: the seed kernel")
        run.save_eval("c0000", base)
        lineage.tag_baseline("c0000")
        lineage.accept("c0000")
        run.append_event("baseline", cid="c0000", status="correct", fitness=0.5, workspace_parent="c0000")
        write_candidate(src, f"BLOCK_M = 64\n# {PAYLOAD}\nNOTE = '''{PAYLOAD}'''\n")
        bad = result("rejected", rule="static.library_call", message=f"kernel.py:2 {PAYLOAD}")
        cid = lineage.commit(src, parent="c0000", result=bad, model="m", rationale=f"try this {PAYLOAD}")
        run.save_eval(cid, bad)
        run.append_event("model_turn", text=f"thinking {PAYLOAD}", model="m",
                         tool_calls=[{"id": "t1", "name": "evaluate", "arguments": {"rationale": PAYLOAD},
                                      "raw_arguments": None}], usage={}, elapsed_s=5.0)
        run.append_event("tool_call", id="t1", name="evaluate", arguments={"rationale": PAYLOAD}, raw_arguments=None)
        run.append_event("tool_result", id="t1", name="evaluate", content=f"{cid}: rejected {PAYLOAD}",
                         is_error=False, elapsed_s=6.0,
                         data={"cid": cid, "status": "rejected", "fitness": 0.0, "duplicate_of": None})
        run.set_state("finished", reason=PAYLOAD)
    return run
