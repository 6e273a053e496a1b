"""A user's workload: the cases a run times instead of the task's bench suite, each with a weight.

Three forms build one (for the built-in tasks, attention and gemm):
- `--shapes B=8,Hq=32,Hkv=8,S=2048,D=128,causal` (attention) or `M=512,N=6144,K=4096` (gemm), repeatable, each
  with an optional `weight=` (the case's share of the user's time; default equal) and dtype (`fp16`, `bf16`);
- `--workload FILE.yaml`: a `name` and a list of `cases`, each a mapping of the same keys or a `--shapes` string;
- `--model config.json --tokens 2048,8192 [--batch 1]`: a Hugging Face model config, from which the attention cases
  (causal prefill, S = each token count) or the four linear layers' GEMMs (M = each token count) are derived.

A Workload is data (cases, weights, where they came from): it is stored in run.json (`evaluation.workload`) and
handed to the evaluator's workers, whose task then times it as its bench suite and adds its head dims, group sizes
and matrix widths to the check suite (`check_cases`), so correctness is checked at the user's shapes too.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable, Literal

import yaml
from pydantic import BaseModel, ConfigDict

from avo.errors import UserError, read_user_file
from avo.tasks.base import Case
from avo.tasks.cases import attention_case, gemm_case

TASKS = ("attention", "gemm")
KEYS = {"attention": ("B", "Hq", "Hkv", "S", "D", "causal"), "gemm": ("M", "N", "K")}
REQUIRED = {"attention": ("Hq", "S", "D"), "gemm": ("M", "N", "K")}
"""Attention's B defaults to 1, Hkv to Hq (multi-head), causal to false."""
HEAD_DIMS = (64, 128)
DTYPES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16"}
OPTIONS = ("weight", "dtype", "name")
CHECK_SEQLEN = 257
"""Sequence length of the check cases added for a workload's heads: no tile edge divides it."""
CHECK_ROWS = 77
"""M of the check cases added for a workload's GEMM widths: ragged against every tile height."""
LAYERS = ("qkv", "o", "gate_up", "down")


class WorkloadCase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    params: dict[str, int | bool]
    dtype: str = "bfloat16"
    weight: float = 1.0
    """Share of the user's time (relative to the other cases' weights)."""


class Workload(BaseModel):
    """The cases a run times in place of the task's bench suite (fitness: their weighted geometric mean)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    task: Literal["attention", "gemm"]
    source: str
    """Where it came from, for people: '--shapes', 'workload.yaml', 'model llama-3-8b.json, tokens 2048,8192'."""
    cases: list[WorkloadCase]

    def bench_cases(self) -> list[Case]:
        return [Case(c.name, dict(_with_defaults(c.params, self.task)), c.dtype, c.weight) for c in self.cases]

    def describe(self) -> str:
        """One line: 'llama-3-8b: 4 cases from model llama-3-8b.json, tokens 2048,8192'."""
        weights = {c.weight for c in self.cases}
        weighted = "" if len(weights) == 1 else ", weighted"
        return f"{self.name}: {len(self.cases)} {self.task} cases{weighted} from {self.source}"


def _with_defaults(params: dict, task: str) -> dict:
    if task != "attention":
        return params
    full = {"B": 1, "Hkv": params.get("Hq"), "causal": False, **params}
    full.setdefault("magnitude", 1.0)
    return full


def recorded(config: dict | None) -> Workload | None:
    """The workload a run's recorded config (run.json's `config`) holds, or None (its bench suite was timed)."""
    data = ((config or {}).get("evaluation") or {}).get("workload")
    try:
        return Workload.model_validate(data) if data else None
    except ValueError:  # recorded by another version in another form: not named rather than misnamed
        return None


def from_flags(task: str, *, shapes: list[str] | None = None, workload: str | None = None,
               model: str | None = None, tokens: str | None = None, batch: int | None = None) -> Workload | None:
    """The workload the command-line flags give (one form at most), or None when none is given."""
    forms = [flag for flag, given in (("--shapes", shapes), ("--workload", workload), ("--model", model)) if given]
    if len(forms) > 1:
        raise UserError(f"{forms[0]} and {forms[1]} both give the workload: use one of --shapes, --workload, --model")
    if not model and (tokens is not None or batch is not None):
        raise UserError(f"{'--tokens' if tokens is not None else '--batch'} goes with --model config.json")
    if shapes:
        return from_shapes(task, list(shapes))
    if workload:
        return from_file(task, workload)
    if model:
        return from_model(task, model, tokens, batch)
    return None


def with_workload(workload: Workload | None, suite: str, builtin: Callable[[str], list[Case]]) -> list[Case]:
    """A built-in task's cases of `suite` under a workload: its cases as the bench suite, the check suite with
    `check_cases` added; every other suite (and everything without a workload) as built in."""
    if workload is None:
        return builtin(suite)
    if suite == "bench":
        return workload.bench_cases()
    if suite == "check":
        return builtin(suite) + check_cases(workload)
    return builtin(suite)


def check_cases(workload: Workload | None) -> list[Case]:
    """Check-suite cases at the workload's own heads (attention: its head dims and group sizes, S odd) or widths
    (gemm: its N and K, M odd), one per distinct combination."""
    if workload is None:
        return []
    seen: dict[str, Case] = {}
    for case in workload.bench_cases():
        p = case.params
        if workload.task == "attention":
            made = attention_case(1, p["Hq"], p["Hkv"], CHECK_SEQLEN, p["D"], p["causal"], case.dtype)
        else:
            made = gemm_case(CHECK_ROWS, p["N"], p["K"], case.dtype)
        seen.setdefault(made.name, made)
    return list(seen.values())


def from_shapes(task: str, specs: list[str]) -> Workload:
    """`--shapes` given once or more."""
    _known_task(task, "--shapes")
    cases = [_case_of(task, _parse_spec(spec, task), f"--shapes {spec}") for spec in specs]
    return _workload("shapes", task, "--shapes", cases)


def from_file(task: str, path: str | Path) -> Workload:
    """`--workload FILE.yaml`: `name` (default: the file's stem), optional `task`, and `cases`."""
    _known_task(task, "--workload")
    path = Path(path)
    where = f"--workload {path}"
    text = read_user_file(path, "workload file", f"{where} is a folder: give a YAML file")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UserError(f"workload file {path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise UserError(f"workload file {path} must hold a mapping with `cases:` (a list of shapes)")
    unknown = sorted(set(data) - {"name", "task", "cases"})
    if unknown:
        raise UserError(f"workload file {path}: unknown key '{unknown[0]}' (use name, task and cases)")
    if data.get("task", task) != task:
        raise UserError(f"workload file {path} is for task '{data['task']}', not --kernel {task}")
    items = data.get("cases")
    if not isinstance(items, list):
        raise UserError(f"workload file {path} needs `cases:`, a list of shapes")
    cases = []
    for i, item in enumerate(items):
        at = f"{where}, case {i + 1}"
        if isinstance(item, str):
            cases.append(_case_of(task, _parse_spec(item, task, at), at))
        elif isinstance(item, dict):
            cases.append(_case_of(task, {str(k): v for k, v in item.items()}, at))
        else:
            raise UserError(f"{at}: give a mapping (Hq: 32, ...) or a shape string, not {type(item).__name__}")
    return _workload(str(data.get("name") or path.stem), task, path.name, cases)


def from_model(task: str, path: str | Path, tokens: str | None, batch: int | None = None) -> Workload:
    """`--model config.json --tokens 2048,8192 [--batch B]`: attention = causal prefill of each token count (B
    sequences); gemm = the linear layers of one block, M = each token count: qkv (N = (Hq + 2 Hkv) D, K = hidden),
    o (N = hidden, K = Hq D), gate and up fused (N = 2 intermediate, K = hidden), down (N = hidden,
    K = intermediate)."""
    _known_task(task, "--model")
    path = Path(path)
    counts = _tokens(tokens)
    b = 1 if batch is None else batch
    if b < 1:
        raise UserError(f"--batch {b}: give a positive number of sequences")
    config = _read_config(path)
    hq = _field(config, "num_attention_heads", path)
    hidden = _field(config, "hidden_size", path)
    hkv = _field(config, "num_key_value_heads", path) if config.get("num_key_value_heads") is not None else hq
    if config.get("head_dim") is not None:
        d = _field(config, "head_dim", path)
    elif hidden % hq:
        raise UserError(f"model config {path}: hidden_size {hidden} is not a multiple of num_attention_heads {hq}, "
                        "and no head_dim is given")
    else:
        d = hidden // hq
    source = f"model {path.name}, tokens {','.join(map(str, counts))}"
    if task == "attention":
        source += f", batch {b}"
        cases = [_case_of(task, {"B": b, "Hq": hq, "Hkv": hkv, "S": s, "D": d, "causal": True}, f"--model {path}")
                 for s in counts]
    else:
        if batch is not None:
            raise UserError("--batch goes with --kernel attention; for gemm the token count is M")
        inter = _field(config, "intermediate_size", path)
        layers = {"qkv": ((hq + 2 * hkv) * d, hidden), "o": (hidden, hq * d), "gate_up": (2 * inter, hidden),
                  "down": (hidden, inter)}
        cases = []
        for m in counts:
            for layer in LAYERS:
                n, k = layers[layer]
                case = _case_of(task, {"M": m, "N": n, "K": k}, f"--model {path}")
                cases.append(case.model_copy(update={"name": f"{layer}_{case.name}"}))
    return _workload(str(config.get("_name_or_path") or path.stem).rsplit("/", 1)[-1], task, source, cases)


def _known_task(task: str, flag: str) -> None:
    if task not in TASKS:
        raise UserError(f"{flag} goes with --kernel attention or gemm (a task file brings its own shapes)")


def _workload(name: str, task: str, source: str, cases: list[WorkloadCase]) -> Workload:
    if not cases:
        raise UserError(f"the workload from {source} holds no cases: give at least one shape")
    seen: set[str] = set()
    for case in cases:
        if case.name in seen:
            raise UserError(f"the workload from {source} lists {case.name} twice: give each shape once (its weight "
                            "says how much it counts)")
        seen.add(case.name)
    return Workload(name=name, task=task, source=source, cases=cases)


def _parse_spec(spec: str, task: str, where: str | None = None) -> dict[str, Any]:
    """`B=8,Hq=32,...,causal,fp16,weight=2` -> {"B": "8", ..., "causal": True, "dtype": "fp16", "weight": "2"}."""
    where = where or f"--shapes {spec}"
    items: dict[str, Any] = {}
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        key, eq, value = (s.strip() for s in part.partition("="))
        if not eq:
            if key in DTYPES:
                key, value = "dtype", key
            elif task == "attention" and key == "causal":
                value = True
            else:
                raise UserError(f"{where}: '{part}' is not KEY=VALUE ({_keys(task)})")
        if key in items:
            raise UserError(f"{where}: {key} given twice")
        items[key] = value
    return items


def _case_of(task: str, items: dict[str, Any], where: str) -> WorkloadCase:
    """One validated case: known keys, required ones present, sizes the task can run."""
    items = dict(items)
    unknown = [k for k in items if k not in KEYS[task] and k not in OPTIONS]
    if unknown:
        raise UserError(f"{where}: unknown key '{unknown[0]}' ({_keys(task)})")
    missing = [k for k in REQUIRED[task] if k not in items]
    if missing:
        raise UserError(f"{where}: missing {missing[0]} ({_keys(task)})")
    weight = _number(items.pop("weight", 1.0), "weight", where, float)
    if not weight > 0 or not math.isfinite(weight):
        raise UserError(f"{where}: weight must be a positive number, not {weight:g}")
    dtype_text = str(items.pop("dtype", "bfloat16")).lower()
    if dtype_text not in DTYPES:
        raise UserError(f"{where}: dtype '{dtype_text}' is not one the task checks: use bf16 or fp16")
    name = items.pop("name", None)
    params: dict[str, int | bool] = {}
    for key, value in items.items():
        params[key] = _flag(value, where) if key == "causal" else _number(value, key, where, int)
        if key != "causal" and params[key] < 1:
            raise UserError(f"{where}: {key} = {params[key]}: sizes must be at least 1")
    if task == "attention":
        hq, hkv = params["Hq"], params.setdefault("Hkv", params["Hq"])
        if params["D"] not in HEAD_DIMS:
            raise UserError(f"{where}: head dim D = {params['D']} is not one attention runs: use 64 or 128")
        if hq % hkv:
            raise UserError(f"{where}: Hq = {hq} is not a multiple of Hkv = {hkv} (each kv head serves a whole "
                            "group of query heads)")
        params.setdefault("B", 1)
        params.setdefault("causal", False)
    made = _task_case(task, params, DTYPES[dtype_text])
    return WorkloadCase(name=str(name) if name else made.name, params=params, dtype=made.dtype, weight=weight)


def _task_case(task: str, p: dict, dtype: str) -> Case:
    if task == "attention":
        return attention_case(p["B"], p["Hq"], p["Hkv"], p["S"], p["D"], bool(p["causal"]), dtype)
    return gemm_case(p["M"], p["N"], p["K"], dtype)


def _keys(task: str) -> str:
    required = ", ".join(REQUIRED[task])
    optional = ", ".join([k for k in KEYS[task] if k not in REQUIRED[task]] + ["weight", "dtype"])
    return f"{task} takes {required}; optional {optional}"


def _number(value: Any, key: str, where: str, kind: type) -> Any:
    if isinstance(value, bool):
        raise UserError(f"{where}: {key} must be a number, not {value}")
    try:
        number = float(value) if kind is float else int(str(value), 10) if isinstance(value, str) else value
    except (TypeError, ValueError):
        raise UserError(f"{where}: {key} = '{value}' is not a{'' if kind is float else 'n integer'} number") from None
    if kind is int and (not isinstance(number, int) or isinstance(number, bool)):
        raise UserError(f"{where}: {key} = {value} is not an integer")
    return number


def _flag(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise UserError(f"{where}: causal = '{value}': use true or false")


def _tokens(tokens: str | None) -> list[int]:
    if not tokens:
        raise UserError("--model needs --tokens, the token counts to run: e.g. --tokens 2048,8192")
    counts = []
    for part in (p.strip() for p in tokens.split(",") if p.strip()):
        try:
            count = int(part)
        except ValueError:
            raise UserError(f"--tokens {tokens}: '{part}' is not a whole number") from None
        if count < 1:
            raise UserError(f"--tokens {tokens}: token counts must be at least 1")
        counts.append(count)
    if not counts:
        raise UserError("--tokens is empty: give the token counts to run, e.g. 2048,8192")
    return list(dict.fromkeys(counts))


def _read_config(path: Path) -> dict:
    text = read_user_file(path, "model config", f"--model {path} is a folder: give its config.json")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"model config {path} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise UserError(f"model config {path} must hold a JSON object (a Hugging Face config.json)")
    return data.get("text_config") if isinstance(data.get("text_config"), dict) else data


def _field(config: dict, key: str, path: Path) -> int:
    value = config.get(key)
    if value is None:
        raise UserError(f"model config {path} has no {key}: avo derives the shapes from num_attention_heads, "
                        "num_key_value_heads, head_dim (or hidden_size), hidden_size and intermediate_size")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"model config {path}: {key} = {value!r} is not a positive integer")
    return value
