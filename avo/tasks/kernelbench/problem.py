"""A KernelBench-format problem file: import it, find its size constants, and measure it on the meta device.

The file defines `Model(nn.Module)`, `get_inputs()` and `get_init_inputs()`, usually with module-level size
constants (`batch_size = 16`, `dim = 16384`) that those functions read. A size constant read by `get_inputs` (or, if
at least 16, only by `get_init_inputs`) and never by Model's own code is a *knob*: setting it while the file's
functions run gives the same problem at another size. Every size is tried on the meta device first (shapes, FLOPs,
bytes, no memory), so a size that breaks the model is never offered.
"""

from __future__ import annotations

import ast
import contextlib
import dis
import importlib.util
import itertools
import re
import sys
import types
from pathlib import Path
from typing import Any

from avo.errors import UserError
from avo.tasks.kernelbench.cache import Measure, MeasureCache
from avo.tasks.kernelbench.sizes import knob_size
from avo.util.format import first_line

FORMAT = "a KernelBench-format file defines class Model(nn.Module), get_inputs() and get_init_inputs()"
INIT_ONLY_KNOB_MIN = 16
"""A constant read only by get_init_inputs counts as a size from this value up (below: kernel sizes, strides)."""
_counter = itertools.count()


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
    """Global names a function reads (not attributes: `self.dim` is not `dim`), in order of first use, including
    those of nested functions."""
    seen: dict[str, None] = dict.fromkeys(
        ins.argval for ins in dis.get_instructions(code) if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            seen.update(dict.fromkeys(_names_read(const)))
    return list(seen)


def _names_read_by_model(module: types.ModuleType) -> set[str]:
    """Global names Model's code reads, following the file's own functions and classes it uses."""
    names: set[str] = set()
    pending: list[Any] = [module.Model]
    seen: set[int] = set()
    while pending:
        obj = pending.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        codes = []
        if isinstance(obj, type):
            for klass in obj.__mro__:
                if klass.__module__ != module.__name__:
                    continue
                for value in vars(klass).values():
                    fn = getattr(value, "__func__", value)
                    if isinstance(fn, types.FunctionType):
                        codes.append(fn.__code__)
        elif isinstance(obj, types.FunctionType):
            codes.append(obj.__code__)
        for code in codes:
            for name in _names_read(code):
                names.add(name)
                value = vars(module).get(name)
                if getattr(value, "__module__", None) == module.__name__:
                    pending.append(value)
    return names


def derived_constants(source: str) -> dict[str, tuple[list[str], types.CodeType]]:
    """Top-level constants computed from earlier ones (`input_shape = (num_classes,)`): name -> (the constants it
    reads, its expression compiled), in file order. They follow their sources when a size is set."""
    derived: dict[str, tuple[list[str], types.CodeType]] = {}
    assigned: set[str] = set()
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        reads = [n.id for n in ast.walk(node.value) if isinstance(n, ast.Name) and n.id in assigned]
        if reads:
            derived[name] = (reads, compile(ast.Expression(node.value), "<constant>", "eval"))
        assigned.add(name)
    return derived


def _expand(names: list[str], derived: dict) -> list[str]:
    """A derived constant stands for the constants it is computed from."""
    out: list[str] = []
    for name in names:
        for source in (_expand(derived[name][0], derived) if name in derived else [name]):
            if source not in out:
                out.append(source)
    return out


def find_knobs(module: types.ModuleType, derived: dict | None = None) -> list[str]:
    """Size constants the file's get_inputs/get_init_inputs read (directly or through a derived constant) and Model's
    code does not."""
    def is_size(value: Any) -> bool:
        return knob_size(value) >= 2

    derived = derived or {}
    by_inputs = _names_read(module.get_inputs.__code__) if hasattr(module.get_inputs, "__code__") else []
    by_init = _names_read(module.get_init_inputs.__code__) if hasattr(module.get_init_inputs, "__code__") else []
    by_inputs, by_init = _expand(by_inputs, derived), _expand(by_init, derived)
    model_reads = sorted(_names_read_by_model(module))
    frozen = set(model_reads) | set(_expand(model_reads, derived))
    knobs = [n for n in by_inputs if is_size(vars(module).get(n)) and n not in frozen]
    knobs += [n for n in by_init if n not in knobs and n not in frozen and is_size(vars(module).get(n))
              and knob_size(vars(module)[n]) >= INIT_ONLY_KNOB_MIN]
    return knobs


def measure_of(inputs: tuple, out: Any, model: Any, flops: float) -> Measure:
    import torch

    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    params = [*model.parameters(), *model.buffers()]
    return Measure(
        signature=signature(inputs), output_shape=tuple(out.shape), output_dtype=str(out.dtype).removeprefix("torch."),
        flops=flops, input_bytes=sum(x.numel() * x.element_size() for x in tensors),
        output_bytes=out.numel() * out.element_size(), param_bytes=sum(p.numel() * p.element_size() for p in params),
        elements=sum(x.numel() for x in tensors) + out.numel() + sum(p.numel() for p in params),
    )


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
        self.derived = derived_constants(self.source)
        self.knobs = find_knobs(self.module, self.derived)
        self.file_sizes = {k: vars(self.module)[k] for k in self.knobs}
        self.measures = MeasureCache(self.source, path.stem)

    @contextlib.contextmanager
    def sized(self, sizes: dict[str, Any]):
        """The file's size constants set to `sizes`, and the constants derived from them recomputed, while the block
        runs."""
        namespace = vars(self.module)
        saved = {k: namespace[k] for k in [*sizes, *self.derived] if k in namespace}
        namespace.update(sizes)
        try:
            if sizes:
                for name, (_, expression) in self.derived.items():
                    namespace[name] = eval(expression, namespace)  # the file's own expression, as its import ran it
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

    def init_inputs(self, sizes: dict[str, int], seed: int) -> list:
        """get_init_inputs() with torch's RNG seeded (should it draw tensors, every build gets the same)."""
        import torch

        torch.manual_seed(seed)
        return self.call_file("get_init_inputs", sizes)

    def build(self, cls: type, init_inputs: list, seed: int) -> Any:
        """`cls(*init_inputs)` with torch's RNG seeded, so two builds hold the same parameters."""
        import torch

        torch.manual_seed(seed)
        return cls(*init_inputs)

    def measure(self, sizes: dict[str, int], dtype: Any) -> Measure:
        """Run the model once on the meta device; raises (any exception) if this size does not work."""
        import torch
        from torch.utils.flop_counter import FlopCounterMode

        with torch.random.fork_rng(devices=[]), torch.device("meta"):
            inputs = tuple(cast_input(x, dtype) for x in self.call_file("get_inputs", sizes))
            model = self.build(self.module.Model, self.init_inputs(sizes, seed=0), seed=0)
        if dtype is not None:
            model = model.to(dtype)
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            out = model(*inputs)
        if type(out) is not torch.Tensor:
            kind = f"{type(out).__module__}.{type(out).__qualname__}"
            raise UserError(f"{self.path}: Model.forward returns a {kind}; avo scores one output tensor per call")
        return measure_of(inputs, out, model, float(counter.get_total_flops()))

    def try_measure(self, sizes: dict[str, Any], dtype: Any) -> Measure | None:
        """`measure`, remembered on disk; None where this size does not run."""
        key = self.measures.key(sizes, dtype)
        if key in self.measures:
            return self.measures.get(key)
        try:
            measured = self.measure(sizes, dtype)
        except UserError as exc:
            if "Model.forward returns" in str(exc):
                raise
            measured = None
        except Exception:
            measured = None
        self.measures.put(key, measured)
        return measured
