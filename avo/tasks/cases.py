"""The built-in tasks' cases by their shapes: the names they read by in tables, and their parameters. Below both
the tasks and the workloads that build cases of them (tasks/workload.py)."""

from __future__ import annotations

from avo.tasks.base import Case


def attention_case(b: int, hq: int, hkv: int, s: int, d: int, causal: bool, dtype: str = "bfloat16",
                   magnitude: float = 1.0) -> Case:
    name = f"b{b}_h{hq}-{hkv}_s{s}_d{d}" + ("_causal" if causal else "")
    if dtype != "bfloat16":
        name += "_fp16" if dtype == "float16" else f"_{dtype}"
    if magnitude != 1.0:
        name += f"_x{magnitude:g}"
    params = {"B": b, "Hq": hq, "Hkv": hkv, "S": s, "D": d, "causal": causal, "magnitude": magnitude}
    return Case(name=name, params=params, dtype=dtype)


def gemm_case(m: int, n: int, k: int, dtype: str = "bfloat16") -> Case:
    name = f"{m}x{n}x{k}" + ("_fp16" if dtype == "float16" else "")
    return Case(name=name, params={"M": m, "N": n, "K": k}, dtype=dtype)
