"""A KernelBench-format problem file: import it, find its size constants, and measure it on the meta device.

The file defines `Model(nn.Module)`, `get_inputs()` and `get_init_inputs()`, usually with module-level size
constants (`batch_size = 16`, `dim = 16384`) that those functions read. A size constant read by `get_inputs` (or, if
at least 16, only by `get_init_inputs`) and never by Model's own code is a *knob*: setting it while the file's
functions run gives the same problem at another size. Every size is tried on the meta device first (shapes, FLOPs,
bytes, no memory), so a size that breaks the model is never offered.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from avo.errors import UserError

FORMAT = "a KernelBench-format file defines class Model(nn.Module), get_inputs() and get_init_inputs()"
INIT_ONLY_KNOB_MIN = 16
"""A constant read only by get_init_inputs counts as a size from this value up (below: kernel sizes, strides)."""
_counter = itertools.count()


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def import_problem(path: Path) -> types.ModuleType:
    """The file as a module under a unique name; UserError with the first line of the error if it fails."""
    name = f"avo_kernelbench_{re.sub(r'[^0-9A-Za-z_]', '_', path.stem)}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserError(f"{path}: not importable as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling in the file look themselves up here
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(name, None)
        raise UserError(f"{path}: importing it failed: SyntaxError: {exc.msg} (line {exc.lineno})") from None
    except (Exception, SystemExit) as exc:
        sys.modules.pop(name, None)
        raise UserError(f"{path}: importing it failed: {first_line(exc)}") from None
    import torch

    model = getattr(module, "Model", None)
    if model is None:
        raise UserError(f"{path} defines no `Model`: {FORMAT}")
    if not (isinstance(model, type) and issubclass(model, torch.nn.Module)):
        raise UserError(f"{path}: `Model` is not an nn.Module subclass: {FORMAT}")
    for fn in ("get_inputs", "get_init_inputs"):
        if not callable(getattr(module, fn, None)):
            raise UserError(f"{path} defines no `{fn}()`: {FORMAT}")
    return module


def _names_read(code: types.CodeType) -> list[str]:
    """Global names a function reads, in order of first use, including those of nested functions."""
    seen: dict[str, None] = dict.fromkeys(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            seen.update(dict.fromkeys(_names_read(const)))
    return list(seen)


def _class_names(cls: type) -> set[str]:
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass.__module__.startswith("torch"):
            break
        for value in vars(klass).values():
            fn = getattr(value, "__func__", value)
            if isinstance(fn, types.FunctionType):
                names.update(_names_read(fn.__code__))
    return names


def find_knobs(module: types.ModuleType) -> list[str]:
    """Size constants the file's get_inputs/get_init_inputs read and Model's code does not."""
    def is_size(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 2

    by_inputs = _names_read(module.get_inputs.__code__) if hasattr(module.get_inputs, "__code__") else []
    by_init = _names_read(module.get_init_inputs.__code__) if hasattr(module.get_init_inputs, "__code__") else []
    frozen = _class_names(module.Model)
    knobs = [n for n in by_inputs if is_size(vars(module).get(n)) and n not in frozen]
    knobs += [n for n in by_init if n not in knobs and n not in frozen and is_size(vars(module).get(n))
              and vars(module)[n] >= INIT_ONLY_KNOB_MIN]
    return knobs


@dataclass(frozen=True)
class Measure:
    """One size of the problem, measured on the meta device (sizes in the cast dtype)."""

    signature: tuple
    output_shape: tuple[int, ...]
    output_dtype: str
    flops: float
    input_bytes: int
    output_bytes: int
    param_bytes: int
    elements: int
    """Input, output and parameter elements together: what the interpreter has to chew through."""


def cast_input(x: Any, dtype: Any) -> Any:
    import torch

    if dtype is not None and isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.to(dtype)
    return x


def signature(inputs: tuple) -> tuple:
    """What tells two sizes apart from the inputs alone (shapes, dtypes, plain values)."""
    import torch

    return tuple((tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else ("value", repr(x)) for x in inputs)


class Problem:
    """The imported file plus what is needed to run it at a chosen size."""

    def __init__(self, path: Path):
        self.path = path
        self.source = path.read_text()
        self.module = import_problem(path)
        self.knobs = find_knobs(self.module)
        self.file_sizes = {k: vars(self.module)[k] for k in self.knobs}

    @contextlib.contextmanager
    def sized(self, sizes: dict[str, int]):
        """The file's size constants set to `sizes` while the block runs."""
        namespace = vars(self.module)
        saved = {k: namespace[k] for k in sizes}
        namespace.update(sizes)
        try:
            yield
        finally:
            namespace.update(saved)

    def call_file(self, fn: str, sizes: dict[str, int]) -> list:
        with self.sized(sizes):
            try:
                values = getattr(self.module, fn)()
            except Exception as exc:
                raise UserError(f"{self.path}: {fn}() failed: {first_line(exc)}") from None
        if not isinstance(values, (list, tuple)):
            raise UserError(f"{self.path}: {fn}() returned a {type(values).__name__}, not a list")
        return list(values)

    def build(self, cls: type, sizes: dict[str, int], seed: int) -> Any:
        """`cls(*get_init_inputs())` with torch's RNG seeded, so two builds hold the same parameters."""
        import torch

        init = self.call_file("get_init_inputs", sizes)
        torch.manual_seed(seed)
        return cls(*init)

    def measure(self, sizes: dict[str, int], dtype: Any) -> Measure:
        """Run the model once on the meta device; raises (any exception) if this size does not work."""
        import torch
        from torch.utils.flop_counter import FlopCounterMode

        with torch.device("meta"):
            inputs = tuple(cast_input(x, dtype) for x in self.call_file("get_inputs", sizes))
            model = self.build(self.module.Model, sizes, seed=0)
        if dtype is not None:
            model = model.to(dtype)
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            out = model(*inputs)
        if type(out) is not torch.Tensor:
            kind = f"{type(out).__module__}.{type(out).__qualname__}"
            raise UserError(f"{self.path}: Model.forward returns a {kind}; avo scores one output tensor per call")
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        params = list(model.parameters()) + list(model.buffers())
        return Measure(
            signature=signature(inputs), output_shape=tuple(out.shape),
            output_dtype=str(out.dtype).removeprefix("torch."), flops=float(counter.get_total_flops()),
            input_bytes=sum(x.numel() * x.element_size() for x in tensors),
            output_bytes=out.numel() * out.element_size(), param_bytes=sum(p.numel() * p.element_size() for p in params),
            elements=sum(x.numel() for x in tensors) + out.numel() + sum(p.numel() for p in params),
        )

    def try_measure(self, sizes: dict[str, int], dtype: Any) -> Measure | None:
        try:
            return self.measure(sizes, dtype)
        except UserError as exc:
            if "Model.forward returns" in str(exc):
                raise
            return None
        except Exception:
            return None


def second_sizes(sizes: dict[str, int]) -> list[dict[str, int]]:
    """Other sizes worth checking, best first: three quarters (multiples of 8), then half."""
    three_quarters = {k: max(8, (v * 3 // 4) // 8 * 8) if v >= 16 else v for k, v in sizes.items()}
    half = {k: max(1, v // 2) for k, v in sizes.items()}
    return [s for s in (three_quarters, half) if s != sizes]


def downsized(problem: Problem, sizes: dict[str, int], dtype: Any, budget: int) -> tuple[dict[str, int], Measure]:
    """Halve the largest knob until the problem's elements fit `budget` (knobs that break the model stay put)."""
    current = dict(sizes)
    best = problem.measure(current, dtype)
    frozen: set[str] = set()
    while best.elements > budget:
        movable = [k for k in current if k not in frozen and current[k] > 1]
        if not movable:
            break
        knob = max(movable, key=lambda k: current[k])
        trial = {**current, knob: (current[knob] + 1) // 2}
        measured = problem.try_measure(trial, dtype)
        if measured is None:
            frozen.add(knob)
        else:
            current, best = trial, measured
    return current, best
