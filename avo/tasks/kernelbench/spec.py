"""A KernelBench task spec: `path/to/problem.py`, optionally with options after `?`.

`baseline` eager (default: Model in eager PyTorch) or compile (torch.compile(Model)); `dtype` casts floating inputs
and parameters (default: the file's own dtypes); `ops` strict (default: every compute op is the candidate's own) or
partial (torch ops allowed for the parts the candidate does not replace).
"""

from __future__ import annotations

from pathlib import Path

from avo.errors import UserError

DTYPES = {"float32": "float32", "fp32": "float32", "float16": "float16", "fp16": "float16",
          "bfloat16": "bfloat16", "bf16": "bfloat16"}
BASELINES = ("eager", "compile")
OPS = ("strict", "partial")


def parse_spec(spec: str) -> tuple[Path, dict[str, str]]:
    """`problem.py?baseline=compile&dtype=bf16` -> (path, {"baseline": "compile", "dtype": "bfloat16"})."""
    path_text, _, query = spec.partition("?")
    options: dict[str, str] = {}
    for part in filter(None, query.split("&")):
        key, _, value = part.partition("=")
        if key == "baseline" and value in BASELINES:
            options[key] = value
        elif key == "dtype" and value in DTYPES:
            options[key] = DTYPES[value]
        elif key == "ops" and value in OPS:
            options[key] = value
        else:
            raise UserError(f"unknown task option '{part}' in {spec}: use baseline=eager|compile, "
                            "dtype=float32|float16|bfloat16 and ops=strict|partial")
    return Path(path_text), options


def absolute_spec(spec: str) -> str:
    """The spec with its path made absolute, so it means the same file from any working directory."""
    path, options = parse_spec(spec)
    query = "&".join(f"{k}={v}" for k, v in sorted(options.items()))
    return str(path.resolve()) + (f"?{query}" if query else "")


def with_options(spec: str, **options: str | None) -> str:
    """`spec` made absolute with options set (None leaves one as it is): how a CLI flag such as `--baseline
    compile` becomes part of the task spec that travels to the evaluator and the profiler."""
    path, current = parse_spec(spec)
    given = {k: v for k, v in options.items() if v is not None}
    if path.suffix != ".py":  # a built-in task: left as it is
        if given:
            flags = ", ".join(f"--{k}" for k in given)
            raise UserError(f"{flags} applies to KernelBench-format .py tasks only, not '{spec}'")
        return spec
    query = "&".join(f"{k}={v}" for k, v in given.items())
    _, checked = parse_spec(f"{path}?{query}")
    return absolute_spec(f"{path}?" + "&".join(f"{k}={v}" for k, v in {**current, **checked}.items()))
