"""Any KernelBench-format problem: a file with `class Model(nn.Module)`, `get_inputs()` and `get_init_inputs()`; the
candidate's kernel.py defines `ModelNew` with Model's constructor.

Options after the path (`problem.py?baseline=compile&dtype=bfloat16`): see spec.py; under `ops=partial` the
candidate is still scored against the whole Model.

Fixes to the format's known holes: correctness is a relative norm (all zeros never pass); the check suite draws
several input sets and, where the file's size constants allow, a second size, a small one and every knob at 1; the
reference never runs on the candidate's input tensors; Model's parameters are copied into ModelNew by name.
"""

from __future__ import annotations

import hashlib
import traceback
from pathlib import Path
from typing import Any

from avo.errors import UserError
from avo.tasks.base import Case
from avo.tasks.kernelbench.cache import Measure
from avo.tasks.kernelbench.models import (Variant, bind, build_variant, dispatch_mode_active, measure_run,
                                          rng_devices, run_library, run_reference, settle)
from avo.tasks.kernelbench.problem import Problem, cast_input, signature
from avo.tasks.kernelbench.sizes import downsized, format_size, ones, second_sizes
from avo.tasks.kernelbench.spec import BASELINES, DTYPES, OPS, absolute_spec, parse_spec
from avo.util.format import first_line
from avo.util.atomic import write_text_atomic
from avo.util.cache import cache_root

# Relative-norm bounds. Measured on CPU against float64 (512x4096 @ 4096x1024 + bias + ReLU, a 3x3 conv + batch
# norm, layer norm, softmax): fp32 exact ~2e-7; TF32 or fp16 arithmetic 2e-4..3e-4; bf16 arithmetic 1.7e-3..2.3e-3.
# So float32 admits TF32 (cuDNN's default for fp32 convolutions) with 3x headroom and rejects bf16 arithmetic.
# fp16 and bf16 outputs: one rounding is 2.3e-4 / 1.9e-3, as for the gemm task.
TOLERANCE = {"float64": 1e-9, "float32": 1e-3, "float16": 2e-3, "bfloat16": 1e-2}
EXACT = ("int8", "int16", "int32", "int64", "uint8", "bool")
"""Output dtypes compared exactly."""
CHECK_DRAWS = 3
"""Input sets drawn at the file's own size in the check suite."""
TINY_ELEMENTS = 1 << 15
"""Inputs, output and parameters of an interpreter (tiny) case stay under this many elements where the knobs allow."""
BENCH_INPUT_COPIES = 3
"""Input copies alive on the GPU at the least while timing (one source set and its two rotation slots); the bench
stage keeps more sets in rotation where free memory allows (evaluate/worker/rotation_memory.py)."""


class KernelBenchTask:
    entry = "ModelNew"

    def __init__(self, path: str | Path, *, baseline: str = "eager", dtype: str | None = None, ops: str = "strict"):
        import torch

        self.path = Path(path).resolve()
        if baseline not in BASELINES:
            raise UserError(f"unknown baseline '{baseline}': use eager or compile")
        if ops not in OPS:
            raise UserError(f"unknown ops policy '{ops}': use strict or partial")
        self.baseline = baseline
        self.ops = ops
        self.dtype = DTYPES[dtype] if dtype else None
        self.cast = getattr(torch, self.dtype) if self.dtype else None
        self.name = self.path.stem
        self.problem = Problem(self.path)
        self._measures: dict[tuple, tuple[dict[str, Any], Measure | None]] = {}
        self._variants: dict[tuple, Variant] = {}
        self._by_signature: dict[tuple, Variant] = {}
        self._planned: dict[str, list[Case]] | None = None
        self._size_notes: dict[str, list[str]] = {}
        self.meta_ok = self._measure(dict(self.problem.file_sizes), self.cast) is not None
        """Whether the meta device runs the model at the file's size (else its sizes are measured for real); measured
        now, so a forward that returns no tensor is refused as the file loads."""

    @classmethod
    def from_spec(cls, spec: str) -> KernelBenchTask:
        path, options = parse_spec(spec)
        return cls(path, **options)

    @property
    def spec(self) -> str:
        options = {"baseline": self.baseline if self.baseline != "eager" else None, "dtype": self.dtype,
                   "ops": self.ops if self.ops != "strict" else None}
        return absolute_spec(str(self.path) + "?" + "&".join(f"{k}={v}" for k, v in options.items() if v))

    # -- suites -------------------------------------------------------------------------------------------------
    def _measure(self, sizes: dict[str, Any], cast: Any) -> Measure | None:
        key = (_frozen(sizes), cast)
        if key not in self._measures:
            self._measures[key] = (dict(sizes), self.problem.try_measure(sizes, cast))
        return self._measures[key][1]

    def _case(self, sizes: dict[str, int], cast: Any, draw: int = 1) -> Case:
        measured = self._measure(sizes, cast)
        label = ",".join(f"{k}={format_size(v)}" for k, v in sizes.items()) or "file sizes"
        if cast is not self.cast:
            label += "_" + {"float16": "fp16", "float32": "fp32"}.get(str(cast).removeprefix("torch."), str(cast))
        name = label + (f"#{draw}" if draw > 1 else "")
        dtype = measured.output_dtype if measured else (self.dtype or "float32")
        return Case(name=name, params={"sizes": dict(sizes), "cast": cast}, dtype=dtype)

    def _other_size(self, sizes: dict[str, int], cast: Any, taken: set) -> dict[str, int] | None:
        for other in second_sizes(sizes):
            measured = self._measure(other, cast)
            if measured is not None and measured.signature not in taken:
                return other
        return None

    def _plan(self) -> dict[str, list[Case]]:
        import torch

        main = dict(self.problem.file_sizes)
        if not self.meta_ok:  # a model the meta device cannot run: the file's own size only, measured for real
            self.problem.measures.save()
            with torch.random.fork_rng(devices=[]):
                self.problem.init_inputs(main, seed=0)  # its errors, at least, are reported now
            only = [self._case(main, self.cast, d) for d in range(1, CHECK_DRAWS + 1)]
            return {"check": only, "bench": only[:1], "tiny": only[:2]}
        check = [self._case(main, self.cast, d) for d in range(1, CHECK_DRAWS + 1)]
        taken = {self._measure(main, self.cast).signature}
        second = self._other_size(main, self.cast, taken)
        if second is not None:
            check.append(self._case(second, self.cast))
            taken.add(self._measure(second, self.cast).signature)
        check += self._small_cases(main, taken)
        # Triton's interpreter computes tl.dot wrongly on bf16 operands: tiny cases of a bf16 task run in fp16.
        tiny_cast = torch.float16 if self.cast is torch.bfloat16 else self.cast
        small = downsized(self.problem, main, tiny_cast, TINY_ELEMENTS)
        tiny = [self._case(small, tiny_cast, 1), self._case(small, tiny_cast, 2)]
        measured = self._measure(small, tiny_cast)
        if measured is not None and measured.elements > TINY_ELEMENTS:
            self._size_notes["tiny"] = [
                f"{self.name}: the interpreter's size {tiny[0].name} has {measured.elements:,} elements, over the "
                f"{TINY_ELEMENTS:,} aimed at: the rest is the model's own (fixed layers), or its knobs cannot shrink "
                "further without a count of 1"]
        smaller = self._other_size(small, tiny_cast, {measured.signature}) if measured else None
        if smaller is not None:
            tiny.append(self._case(smaller, tiny_cast))
        self.problem.measures.save()
        return {"check": check, "bench": [self._case(main, self.cast)], "tiny": tiny}

    def _small_cases(self, main: dict[str, Any], taken: set) -> list[Case]:
        """The check suite's small sizes: the interpreter's (ragged, a few thousand elements), then every knob at 1
        where the model allows (else as many as allow it, in file order). Bugs that only small sizes show: a row
        shorter than the kernel's block, a grid of one program."""
        small = downsized(self.problem, main, self.cast, TINY_ELEMENTS)
        at_one = ones(small)
        if self._measure(at_one, self.cast) is None:
            at_one = dict(small)
            for knob in small:
                trial = {**at_one, knob: ones({knob: small[knob]})[knob]}
                if self._measure(trial, self.cast) is not None:
                    at_one = trial
        cases = []
        for sizes in (small, at_one):
            measured = self._measure(sizes, self.cast)
            if measured is not None and measured.signature not in taken:
                taken.add(measured.signature)
                cases.append(self._case(sizes, self.cast))
        return cases

    def size_notes(self, suite: str) -> list[str]:
        """How a suite's sizes differ from what was aimed at, for the result's notes."""
        self.cases(suite)
        return list(self._size_notes.get(suite, []))

    @property
    def _suites(self) -> dict[str, list[Case]]:
        """Planned on first use: sizing measures the model at many sizes (a level-3 model, for a minute), work a
        refusal of the run before any evaluation need not wait for."""
        if self._planned is None:
            self._planned = self._plan()
        return self._planned

    def cases(self, suite: str) -> list[Case]:
        if suite not in self._suites:
            raise UserError(f"unknown suite '{suite}': use check, bench or tiny")
        return list(self._suites[suite])

    # -- inputs and models --------------------------------------------------------------------------------------
    def _variant(self, sizes: dict[str, int], cast: Any, device: str) -> Variant:
        key = (_frozen(sizes), cast, device)
        if key in self._variants:
            return self._variants[key]
        variant = build_variant(self.problem, sizes, cast, device, compile_library=self.baseline == "compile")
        held = {t.device.type for t in [*variant.library_model.parameters(), *variant.library_model.buffers()]}
        # Not cached when built for shapes only (compile introspection redirects factories to meta or fakes them).
        if held <= {device} and not dispatch_mode_active():
            self._variants[key] = variant
        return variant

    def _variant_of(self, inputs: tuple) -> Variant:
        import torch

        device = next((x.device.type for x in inputs if isinstance(x, torch.Tensor)), "cpu")
        sig = signature(inputs)
        found = self._by_signature.get((sig, device))
        if found is not None:
            return found
        for (_, cast), (sizes, measured) in self._measures.items():
            if measured is not None and measured.signature == sig:
                variant = self._variant(sizes, cast, device)
                self._by_signature[(sig, device)] = variant
                return variant
        raise ValueError(f"{self.name}: inputs {sig} do not match any case of this task (make them with make_inputs)")

    def make_inputs(self, case: Case, seed: int, device: str) -> tuple:
        import torch

        sizes, cast = case.params["sizes"], case.params["cast"]
        measured = self._measure(sizes, cast)
        if device == "cuda" and measured is not None:
            free = torch.cuda.mem_get_info()[0]
            if measured.input_bytes + measured.output_bytes > free:
                raise UserError(f"{self.path.name}: case {case.name} needs {_gib(measured.input_bytes)} of inputs "
                                f"but the GPU has {_gib(free)} free: lower the file's size constants")
        variant = self._variant(sizes, cast, device)
        with torch.random.fork_rng(devices=rng_devices(device)), torch.device(device):
            torch.manual_seed(seed)
            raw = self.problem.call_file("get_inputs", sizes)
        inputs = tuple(cast_input(x.detach().to(device), cast) if isinstance(x, torch.Tensor) else x for x in raw)
        landed = next((x.device.type for x in inputs if isinstance(x, torch.Tensor)), device)
        self._by_signature[(signature(inputs), landed)] = variant
        if variant.mutates_inputs is None:
            out = settle(self.problem, variant, inputs, self.tolerance(case.dtype))
            if measured is None:
                variant.measured = measure_run(variant, inputs, out)
        return inputs

    def call(self, entry, inputs: tuple):
        variant = self._variant_of(inputs)
        model = variant.bound.get(entry)
        if model is None:
            model = bind(variant, entry)
        variant.start()
        return model(*inputs)

    def reference(self, *inputs):
        """Model's forward on upcast copies of the inputs (float64 on the CPU, float32 on a GPU, TF32 off); in the
        library's own dtype for a model that does not run upcast, or whose upcast output its own disagrees with."""
        return run_reference(self._variant_of(inputs), inputs)

    def library(self, *inputs):
        return run_library(self._variant_of(inputs), inputs)

    def library_name(self) -> str:
        return "torch.compile(Model)" if self.baseline == "compile" else "Model (eager PyTorch)"

    # -- sizes --------------------------------------------------------------------------------------------------
    def _measured(self, case: Case) -> Measure:
        measured = self._measure(case.params["sizes"], case.params["cast"])
        if measured is None:
            variants = [v for v in self._variants.values() if v.sizes == case.params["sizes"] and v.measured]
            if not variants:
                raise ValueError(f"{self.name}: case {case.name} is measured once its inputs are made")
            measured = variants[0].measured
        return measured

    def flops(self, case: Case) -> float:
        """FLOPs torch's FlopCounterMode counts in Model's forward (matmuls, convolutions, attention); 0 when none."""
        return self._measured(case).flops

    def bytes(self, case: Case) -> float:
        m = self._measured(case)
        return float(m.input_bytes + m.output_bytes + m.param_bytes)

    def tolerance(self, dtype: str) -> float:
        if dtype in EXACT:
            return 0.0
        if dtype not in TOLERANCE:
            raise UserError(f"{self.name}: no tolerance for output dtype '{dtype}'")
        return TOLERANCE[dtype]

    def output_like(self, case: Case, inputs: tuple) -> tuple[tuple[int, ...], str]:
        m = self._measured(case)
        return m.output_shape, m.output_dtype

    def preflight(self, device: str) -> None:
        """What can be known before an evaluation starts, as one-line UserErrors: the smallest case runs on the CPU
        (get_inputs works, the model's output can be checked at all); the bench case fits on the GPU (inputs for
        timing, parameters, outputs)."""
        try:
            self.make_inputs(self.cases("tiny")[-1], 0, "cpu")
        except UserError:
            raise
        except Exception as exc:  # the problem file's own code failed: the user's to fix, not avo's
            raise UserError(f"{self.path.name}: {self._faulting_part(exc)} raised {first_line(exc)} "
                            "(at its smallest size, on the CPU): "
                            "the problem file must run as given; fix it and start again") from None
        if device != "cuda":
            return
        import torch

        if not torch.cuda.is_available():
            return
        for case in self.cases("bench"):
            m = self._measure(case.params["sizes"], case.params["cast"])
            if m is None:
                continue
            need = BENCH_INPUT_COPIES * m.input_bytes + 3 * m.param_bytes + 4 * m.output_bytes
            free = torch.cuda.mem_get_info()[0]
            if need > free:
                raise UserError(f"{self.path.name}: case {case.name} needs at least {_gib(need)} on the GPU "
                                f"({BENCH_INPUT_COPIES} input copies of {_gib(m.input_bytes)} for timing, "
                                f"parameters, outputs) but {_gib(free)} are free: lower the file's size constants")

    def _faulting_part(self, exc: Exception) -> str:
        """Which code of the problem file raised: `Model.__init__`, `Model.forward`, `get_inputs`, ..."""
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == self.path]
        if not frames:
            return "running its Model"
        name = frames[-1].name
        return f"Model.{name}" if name in ("__init__", "forward") else name

    # -- the first candidate ------------------------------------------------------------------------------------
    def wrapper_source(self) -> str:
        """kernel.py of the first candidate: the problem file itself, with ModelNew as Model unchanged."""
        return (self.problem.source.rstrip() + "\n\n\nclass ModelNew(Model):\n"
                '    """Model, unchanged: the starting point. Replace its forward with your own kernels."""\n')

    def default_seed(self) -> str:
        text = self.wrapper_source()
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        folder = cache_root() / "kernelbench" / f"{self.name}-{digest}"
        kernel = folder / "kernel.py"
        if not kernel.is_file() or kernel.read_text() != text:
            folder.mkdir(parents=True, exist_ok=True)
            write_text_atomic(kernel, text, tmp_dir=folder.parent)  # outside the folder a copy would take
        return str(folder)

    def is_reference_wrapper(self, candidate_dir: str | Path) -> bool:
        """True for a folder holding exactly the first candidate's kernel.py (notes and metadata aside)."""
        folder = Path(candidate_dir)
        kernel = folder / "kernel.py"
        if not kernel.is_file() or kernel.read_text(errors="replace") != self.wrapper_source():
            return False
        others = [p for p in folder.rglob("*") if p.is_file() and p != kernel and "__pycache__" not in p.parts
                  and p.suffix not in (".md", ".txt", ".json")]
        return not others


def _frozen(sizes: dict[str, Any]) -> tuple:
    """`sizes` as a dict key (a list knob as a tuple)."""
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in sizes.items()))


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"
