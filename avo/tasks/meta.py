"""A case's inputs as meta tensors: what compiling ahead (the evaluator) and compiling for a target (avo inspect)
run a wrapper on, with no memory and no random numbers drawn."""

from __future__ import annotations


def meta_inputs(task, case) -> tuple:
    """The case's inputs as meta tensors (shapes, strides, dtypes; no memory, no random numbers drawn).

    Tensor factories are redirected to the meta device while make_inputs runs; should make_inputs need real values,
    FakeTensorMode (slower to start) and then real CPU tensors are the fallbacks.
    """
    import torch
    from torch.overrides import TorchFunctionMode

    factories = {torch.randn, torch.rand, torch.randint, torch.randperm, torch.empty, torch.empty_strided,
                 torch.zeros, torch.ones, torch.full, torch.arange, torch.linspace, torch.eye}

    class MetaFactories(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func in factories:
                kwargs["device"] = "meta"
                kwargs.pop("generator", None)
                kwargs.pop("pin_memory", None)
            return func(*args, **kwargs)

    try:
        with MetaFactories():
            inputs = task.make_inputs(case, 0, "cpu")
    except Exception:
        from torch._subclasses.fake_tensor import FakeTensorMode

        try:
            with FakeTensorMode():
                inputs = task.make_inputs(case, 0, "cpu")
        except Exception:
            inputs = task.make_inputs(case, 0, "cpu")
    return tuple(torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
                 if isinstance(x, torch.Tensor) else x for x in inputs)
