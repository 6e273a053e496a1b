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

from avo.tasks.kernelbench_problem import Measure, measure_of

PARAM_SEED = 0
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
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def perturb_constant_parameters(model: Any, seed: int) -> None:
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):
            if not p.is_floating_point() or p.numel() < 2 or p.is_meta:  # meta: shapes only, nothing to perturb
                continue
            first = p.detach().reshape(-1)[0]
            if bool((p == first).all()):
                noise = torch.randn(p.shape, generator=gen).to(device=p.device, dtype=p.dtype)
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
    compiled: Any = None
    mutates_inputs: bool | None = None
    """Whether Model's forward writes into its inputs (then the library gets copies)."""
    measured: Any = None
    """A Measure from a real run, where the meta device could not run the model."""
    bound: dict = field(default_factory=dict)


def build_variant(problem: Any, sizes: dict[str, int], cast: Any, device: str, *, compile_library: bool) -> Variant:
    import torch

    cls = problem.module.Model
    with torch.random.fork_rng(devices=rng_devices(device)), torch.device(device):
        init_inputs = problem.init_inputs(sizes, PARAM_SEED)
        library_model = problem.build(cls, init_inputs, PARAM_SEED).to(device)
        perturb_constant_parameters(library_model, PARAM_SEED)
        if cast is not None:
            library_model = library_model.to(cast)
        reference_model = problem.build(cls, init_inputs, PARAM_SEED).to(device)
    reference_model.load_state_dict(library_model.state_dict())
    dtypes = [t.dtype for t in [*library_model.parameters(), *library_model.buffers()]]
    compute = compute_dtype(device, dtypes)
    reference_model = reference_model.to(compute)
    variant = Variant(sizes=sizes, cast=cast, device=device, init_inputs=init_inputs,
                      library_model=freeze(library_model), reference_model=freeze(reference_model), compute=compute)
    if compile_library:
        variant.compiled = torch.compile(variant.library_model, dynamic=False)
    return variant


def first_run(variant: Variant, inputs: tuple) -> Any:
    """Run the library once on copies: does it write into its inputs? (Also compiles torch.compile's graph now,
    outside any evaluation stage.) Returns the output."""
    import torch

    if any(isinstance(x, torch.Tensor) and x.is_meta for x in inputs):
        variant.mutates_inputs = False  # shapes only (compile introspection): nothing to run or compare
        return None
    copies = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)
    fn = variant.compiled if variant.compiled is not None and not dispatch_mode_active() else variant.library_model
    out = fn(*copies)  # grad mode as in the timed calls, so torch.compile's guards match them (nothing needs grad)
    variant.mutates_inputs = any(isinstance(c, torch.Tensor) and not torch.equal(c, x) for c, x in zip(copies, inputs))
    return out


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
