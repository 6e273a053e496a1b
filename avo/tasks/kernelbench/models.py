"""The model instances behind one size of a KernelBench problem: library (task dtype), reference (upcast), and the
candidate's ModelNew with the reference's parameters copied in.

Parameters come from `Model(*get_init_inputs())` built with torch's RNG seeded. A floating parameter holding one
value everywhere (LayerNorm's ones and zeros) gets a little seeded noise first: otherwise a kernel that ignores it
would pass. The reference holds the library's parameters exactly (cast dtype first, then upcast), so it is the exact
function of what the library and the candidate were given.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from avo.errors import UserError
from avo.tasks.kernelbench.cache import Measure
from avo.tasks.kernelbench.problem import measure_of

PARAM_SEED = 0
CALL_SEED = 1
"""Where every call of a model that draws random numbers in its forward starts from."""
NOISE = 0.1
"""Relative size of the noise added to a constant parameter."""


def rng_devices(device: str) -> list[int]:
    import torch

    return [torch.cuda.current_device()] if device == "cuda" else []


def compute_dtype(device: str, dtypes: list[Any]) -> Any:
    """float64 on the CPU; float32 on a GPU (float64 if the problem already is)."""
    import torch

    if device == "cpu" or torch.float64 in dtypes:
        return torch.float64
    return torch.float32


@contextlib.contextmanager
def exact_float32():
    """TF32 off for matmul and cuDNN while the reference runs."""
    import torch

    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def unwatched():
    """Suspends the dispatch modes on the stack (restored on exit): building ModelNew is set-up, not its call, so
    the ops of its constructor are neither recorded as the candidate's compute nor poisoned."""
    from torch.utils._python_dispatch import _disable_current_modes

    return _disable_current_modes()


def dispatch_mode_active() -> bool:
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    return _get_current_dispatch_mode() is not None


def freeze(model: Any) -> Any:
    """No autograd bookkeeping in any call, and dropout layers off: outputs are compared, so a layer that zeroes a
    random fifth of them would fail every candidate (dropout is the identity here, as at inference)."""
    import torch

    for p in model.parameters():
        p.requires_grad_(False)
    for module in model.modules():
        if isinstance(module, (torch.nn.modules.dropout._DropoutNd, torch.nn.AlphaDropout)):
            module.eval()
    return model


def perturb_constant_parameters(model: Any, seed: int) -> None:
    """Seeded noise on every parameter that holds one value everywhere. The noise is drawn on the CPU whatever the
    default device: it is called under `torch.device("cuda")`, where a draw without a device would be on the GPU
    with a CPU generator (RuntimeError "Expected a 'cuda' device type for generator", seen on the H200 as a worker
    that exited with code 1 before its first stage, for every problem with a LayerNorm)."""
    import torch

    gen = torch.Generator(device="cpu").manual_seed(seed)
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):
            if not p.is_floating_point() or p.numel() < 2 or p.is_meta:  # meta: shapes only, nothing to perturb
                continue
            first = p.detach().reshape(-1)[0]
            if bool((p == first).all()):
                noise = torch.randn(p.shape, generator=gen, device="cpu").to(device=p.device, dtype=p.dtype)
                p.add_(noise * (NOISE * max(1.0, abs(float(first)))))


def copy_parameters(source: Any, target: Any) -> None:
    """Parameters, then buffers: by name where name and shape match; the rest in order where the remaining shapes
    are the same sequence (a ModelNew that names its parameters differently but builds them alike)."""
    import torch

    with torch.no_grad():
        for kind in ("named_parameters", "named_buffers"):
            src = dict(getattr(source, kind)())
            dst = dict(getattr(target, kind)())
            done = {n for n, t in dst.items() if n in src and src[n].shape == t.shape}
            for name in done:
                dst[name].copy_(src[name])
            rest_dst = [t for n, t in dst.items() if n not in done]
            rest_src = [t for n, t in src.items() if n not in done]
            if rest_dst and [t.shape for t in rest_dst] == [t.shape for t in rest_src]:
                for t, s in zip(rest_dst, rest_src):
                    t.copy_(s)


@dataclass
class Variant:
    """One size on one device: what library, reference and call run."""

    sizes: dict[str, int]
    cast: Any
    device: str
    init_inputs: list
    library_model: Any
    reference_model: Any
    compute: Any
    """The reference's dtype for floating inputs; None: the library's own (the model would not run upcast)."""
    compiled: Any = None
    mutates_inputs: bool | None = None
    """Whether Model's forward writes into its inputs (then the library gets copies); None until settled."""
    seeded: bool = False
    """Model's forward draws random numbers (a random initial state): every call starts from CALL_SEED."""
    measured: Any = None
    """A Measure from a real run, where the meta device could not run the model."""
    bound: dict = field(default_factory=dict)

    def start(self) -> None:
        """What every call of a random model starts from, the candidate's included."""
        if self.seeded:
            import torch

            torch.manual_seed(CALL_SEED)


def _reference_model(problem: Any, init_inputs: list, library_model: Any, device: str, dtype: Any) -> Any:
    import torch

    with torch.random.fork_rng(devices=rng_devices(device)), torch.device(device):
        model = problem.build(problem.module.Model, init_inputs, PARAM_SEED).to(device)
    model.load_state_dict(library_model.state_dict())  # exactly the library's values, before any upcast
    return freeze(model.to(dtype) if dtype is not None else model)


def build_variant(problem: Any, sizes: dict[str, int], cast: Any, device: str, *, compile_library: bool) -> Variant:
    import torch

    with torch.random.fork_rng(devices=rng_devices(device)), torch.device(device):
        init_inputs = problem.init_inputs(sizes, PARAM_SEED)
        library_model = problem.build(problem.module.Model, init_inputs, PARAM_SEED).to(device)
        perturb_constant_parameters(library_model, PARAM_SEED)
        if cast is not None:
            library_model = library_model.to(cast)
    dtypes = [t.dtype for t in [*library_model.parameters(), *library_model.buffers()]]
    compute = compute_dtype(device, dtypes)
    variant = Variant(sizes=sizes, cast=cast, device=device, init_inputs=init_inputs,
                      library_model=freeze(library_model),
                      reference_model=_reference_model(problem, init_inputs, library_model, device, compute),
                      compute=compute)
    if compile_library:
        variant.compiled = torch.compile(variant.library_model, dynamic=False)
    return variant


def run_reference(variant: Variant, inputs: tuple) -> Any:
    """Model's forward on copies of the inputs, floating ones upcast (TF32 off)."""
    import torch

    args = tuple(x.to(variant.compute or x.dtype, copy=True) if isinstance(x, torch.Tensor) and x.is_floating_point()
                 else (x.clone() if isinstance(x, torch.Tensor) else x) for x in inputs)
    with torch.no_grad(), exact_float32():
        variant.start()
        return variant.reference_model(*args)


def run_library(variant: Variant, inputs: tuple) -> Any:
    import torch

    if variant.mutates_inputs:
        inputs = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)
    variant.start()
    # Under the evaluator's op recorder the compiled graph would hide its ops: eager shows what it computes.
    if variant.compiled is not None and not dispatch_mode_active():
        return variant.compiled(*inputs)
    return variant.library_model(*inputs)


def settle(problem: Any, variant: Variant, inputs: tuple, tolerance: float) -> Any:
    """First real calls of a new size: whether Model writes into its inputs, whether it is random (then seeded per
    call, as a random initial state is only comparable when drawn alike), whether it runs upcast (else the reference
    keeps the library's dtype). torch.compile's graph compiles here too, outside any evaluation stage. Returns the
    library's output; UserError if Model's output cannot be checked at all."""
    import torch

    from avo.tasks.base import relative_error

    if any(isinstance(x, torch.Tensor) and x.is_meta for x in inputs):
        variant.mutates_inputs = False  # shapes only (compile introspection): nothing to run or compare
        return None
    variant.mutates_inputs = True  # copies while settling
    outs = [run_library(variant, inputs) for _ in range(2)]
    if isinstance(outs[0], torch.Tensor) and relative_error(outs[1], outs[0]) > tolerance:
        variant.seeded = True
        outs = [run_library(variant, inputs) for _ in range(2)]
        if relative_error(outs[1], outs[0]) > tolerance:
            raise UserError(f"{problem.path.name}: two calls of Model on the same inputs disagree even from the same "
                            "random seed: no output of it can be checked; make its forward deterministic")
    copies = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)
    variant.start()
    variant.library_model(*copies)  # eager, on copies: does it write into them?
    variant.mutates_inputs = any(isinstance(c, torch.Tensor) and not torch.equal(c, x) for c, x in zip(copies, inputs))
    try:
        upcast_agrees = relative_error(outs[0], run_reference(variant, inputs)) <= tolerance
    except Exception:  # e.g. a forward that makes float32 tensors of its own and mixes them with float64 ones
        upcast_agrees = False
    if not upcast_agrees:  # or random draws that depend on the dtype: the reference keeps the library's dtype
        variant.compute = None
        variant.reference_model = _reference_model(problem, variant.init_inputs, variant.library_model,
                                                    variant.device, None)
    return outs[0]


def bind(variant: Variant, entry: Any) -> Any:
    """The candidate's ModelNew for this size: built like Model, with Model's parameters, cached per entry."""
    import torch

    with unwatched():
        with torch.random.fork_rng(devices=rng_devices(variant.device)), torch.device(variant.device):
            torch.manual_seed(PARAM_SEED)
            model = entry(*variant.init_inputs)
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"ModelNew(...) built a {type(model).__name__}, not an nn.Module: define class "
                            "ModelNew(nn.Module) with Model's constructor arguments")
        copy_parameters(variant.library_model, model)
        model = model.to(variant.device)
        if variant.cast is not None:
            model = model.to(variant.cast)
        freeze(model)
    variant.bound[entry] = model
    return model


def measure_run(variant: Variant, inputs: tuple, out: Any) -> Measure:
    """A Measure from a real run, for a model the meta device cannot run (FLOPs counted on the library)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    copies = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        variant.library_model(*copies)
    return measure_of(inputs, out, variant.library_model, float(counter.get_total_flops()))
