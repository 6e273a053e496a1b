"""What the model is told: the system prompt, the opening message, and the summary a long run restarts from.

The text lives in avo/agent/prompts/*.md ($name placeholders); this module only fills it in. The same summary
serves a context reset and a resume, so both continue from the run directory's facts: best kernel, lineage, notes.
"""

from __future__ import annotations

import inspect
import json
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any, NamedTuple

from avo.util import procs
from avo.agent.models.base import Message, ToolSpec

MAX_NOTES_CHARS = 8_000
MAX_SOURCE_CHARS = 40_000


def prompt(name: str) -> Template:
    return Template(resources.files("avo.agent").joinpath("prompts", f"{name}.md").read_text())


@dataclass
class Situation:
    """The facts a prompt is filled from."""

    task: Any
    gpu: Any
    device: str
    config: Any
    """avo.config.RunConfig"""
    workers: int = 1
    """Evaluations that run at once (evaluate/pool.py)."""
    where: str = ""
    """The workers, for people: 'gpu 0, gpu 1'."""

    def suite(self, name: str) -> str:
        # Under the interpreter the tiny suite is both checked and timed; a workload is timed there as anywhere.
        if self.device == "interpret" and not (name == "bench" and self.workload is not None):
            return "tiny"
        return name

    @property
    def workload(self):
        return getattr(getattr(self.config, "evaluation", None), "workload", None)


def gpu_line(g) -> str:
    """The GPU as the system prompt states it (the heuristic model reads its target and limits back from it)."""
    return (f"{g.name.upper()} ({g.arch}, compute capability {g.compute_capability[0]}.{g.compute_capability[1]}): "
            f"{g.sms} SMs, dense bf16 peak {g.peak_bf16_tflops:g} TFLOPS, HBM {g.hbm_gbps:g} GB/s, "
            f"{g.smem_per_block_kb} KB shared memory per block, {g.l2_mb} MB L2, {g.regs_per_sm} registers per SM"
            + (f", {g.tmem_per_sm_kb} KB tensor memory per SM (tcgen05 accumulators)." if g.tmem_per_sm_kb else "."))


def system_prompt(s: Situation, tools: list[ToolSpec]) -> str:
    bench = s.suite(s.config.evaluation.bench_suite)
    try:
        cases = ", ".join(str(c) for c in s.task.cases(bench))
    except Exception:  # a task file that cannot list cases still gets a prompt; the evaluator will say why
        cases = "(see the evaluate results)"
    gpu_text = gpu_line(s.gpu)
    device_note = ("Candidates run under the Triton interpreter on the CPU (TRITON_INTERPRET=1): times are interpreter "
                   "wall clock, not GPU performance; correctness is real." if s.device == "interpret" else
                   "Candidates run on this GPU; times are CUDA-event medians with the L2 flushed between runs.")
    return prompt("system").safe_substitute(
        task_contract=task_contract(s.task),
        entry=s.task.entry, check_suite=s.suite(s.config.evaluation.check_suite), bench_suite=bench,
        bench_cases=cases, workload_note=workload_note(s), gpu_profile=gpu_text, device_note=device_note,
        workers_note=workers_note(s),
        tool_list="\n".join(f"- {t.name}: {t.description.splitlines()[0]}" for t in tools),
    )


def workload_note(s: Situation) -> str:
    """The user's workload, case by case with its shape and weight (the timed cases are theirs, not the suite's)."""
    w = s.workload
    if w is None:
        return ""
    total = sum(c.weight for c in w.cases)
    rows = [f"- {c.name}: " + " ".join(f"{k}={v}" for k, v in c.params.items()) + f" {c.dtype}, weight "
            f"{c.weight / total:.0%}" for c in w.cases]
    return (f"\nWorkload {w.describe()}: fitness is the weighted geometric mean over these cases, each weighted by "
            "its share of the user's time:\n" + "\n".join(rows))


def bucket_line(result) -> str:
    """' (per bucket: small 1.21, large 0.97)' for a result whose cases fall in a per-shape table's buckets."""
    buckets = result.buckets() if result is not None else []
    if not buckets:
        return ""
    return " (per bucket: " + ", ".join(f"{b} {result.weighted_fitness(b):.4g}" for b in buckets) + ")"


def workers_note(s: Situation) -> str:
    """What the model is told about evaluating several candidates at once (the heuristic model reads the count)."""
    if s.workers <= 1:
        return ""
    return (f"\n{s.workers} evaluation workers ({s.where}): up to {s.workers} `evaluate` calls in one response run at "
            "the same time. Each scores the workspace as it is at that call (edit, evaluate, edit, evaluate, ...), "
            "and they are committed in call order; a call after `checkout` of a candidate id starts from that "
            "candidate. Tools other than the file tools, `note` and `checkout` of a candidate id wait until the "
            "evaluations before them are done.")


def task_contract(task) -> str:
    """The task's own description: its class docstring, else its module's."""
    cls = type(task)
    doc = cls.__dict__.get("__doc__") or getattr(sys.modules.get(cls.__module__), "__doc__", None)
    return inspect.cleandoc(doc) if doc else f"Task {task.name}."


def start_message(baseline_line: str) -> Message:
    return Message(role="user", text=prompt("start").safe_substitute(baseline_line=baseline_line))


def lineage_table(lineage, limit: int = 25) -> str:
    best = lineage.best
    rows = []
    for info in lineage.log(limit=limit):
        mark = "*" if info.cid == best else " "
        rows.append(f"{info.cid}{mark} parent {info.parent or '-':6} {info.status:13} fitness {info.fitness:.4g}  "
                    f"{info.summary[:110]} | {info.rationale[:90]}")
    return "\n".join(rows) or "(no candidates yet)"


def read_notes(run) -> str:
    path = Path(run.notes_path)
    text = path.read_text() if path.is_file() else ""
    if len(text) > MAX_NOTES_CHARS:  # the newest notes matter most
        text = "...(older notes omitted)\n" + text[-MAX_NOTES_CHARS:]
    return text.strip() or "(none yet)"


def best_source(run, lineage) -> tuple[str, str, float]:
    """(cid, kernel.py source, fitness) of the best candidate, or of the baseline when nothing is correct."""
    cid = lineage.best or lineage.baseline
    if cid is None:
        return "-", "(no candidate yet)", 0.0
    with procs.temp_dir("best") as tmp:
        lineage.checkout(cid, Path(tmp))
        kernel = Path(tmp) / "kernel.py"
        source = kernel.read_text() if kernel.is_file() else "(no kernel.py)"
    if len(source) > MAX_SOURCE_CHARS:
        source = source[:MAX_SOURCE_CHARS] + "\n# ... (truncated)"
    result = run.load_eval(cid)
    return cid, source, (result.fitness if result else 0.0)


def _common(s: Situation, run, lineage) -> dict[str, str]:
    cid, source, fitness = best_source(run, lineage)
    return dict(task_name=s.task.name, gpu_name=s.gpu.name, device=s.device, best_cid=cid,
                best_fitness=f"{fitness:.4g}", best_source=source, lineage_table=lineage_table(lineage),
                notes=read_notes(run), best_buckets=bucket_line(run.load_eval(cid) if cid != "-" else None))


def restart_message(s: Situation, run, lineage, *, reason: str, parent: str | None, budget_line: str) -> Message:
    text = prompt("restart").safe_substitute(
        _common(s, run, lineage), reason=reason, budget_line=budget_line,
        workspace_line=f"candidate {parent} (plus any edits since)" if parent else "the seed kernel")
    return Message(role="user", text=text)


def supervisor_request(s: Situation, run, lineage, stalled: int) -> Message:
    return Message(role="user", text=prompt("supervisor_request").safe_substitute(_common(s, run, lineage),
                                                                                  stalled=stalled))


def conversation_tokens(system: str, messages: list[Message]) -> int:
    """A model-independent size estimate (about 4 characters a token), for backends that report no usage."""
    chars = len(system) + sum(len(m.text) + len(json.dumps([c.arguments for c in m.tool_calls]))
                              + sum(len(r.content) for r in m.tool_results) for m in messages)
    return chars // 4


class Counters(NamedTuple):
    candidates: int
    since_improvement: int


def lineage_counters(lineage) -> Counters:
    """Candidates the agent has made (the baseline excluded) and evaluations since the last accepted one."""
    infos = lineage.log()
    since = 0
    for info in infos:  # newest first
        if info.accepted or info.cid == lineage.best:
            break
        since += 1
    return Counters(sum(1 for i in infos if i.parent is not None), since)
