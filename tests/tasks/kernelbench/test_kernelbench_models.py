"""The model instances behind a KernelBench size (avo/tasks/kernelbench/models.py): the noise on constant parameters
does not depend on the default device the models are built under (the worker builds them under torch.device("cuda"))."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn as nn

from avo import tasks
from avo.tasks.kernelbench.models import perturb_constant_parameters

PROBLEMS = Path(__file__).parent / "kb_problems"
pytestmark = pytest.mark.usefixtures("private_cache")


def perturbed(default_device: str | None) -> nn.LayerNorm:
    layer = nn.LayerNorm(64)
    if default_device is None:
        perturb_constant_parameters(layer, 0)
    else:
        with torch.device(default_device):
            perturb_constant_parameters(layer, 0)
    return layer


def test_constant_parameters_get_the_same_noise_under_any_default_device():
    plain = perturbed(None)
    assert not torch.all(plain.weight == 1) and not torch.all(plain.bias == 0)
    # Under a default device other than the parameters' (as under torch.device("cuda") on a GPU machine), a draw
    # without a device of its own lands on that device, away from the CPU generator: meta shows it without a GPU.
    under_meta = perturbed("meta")
    assert under_meta.weight.device.type == "cpu"
    assert torch.equal(under_meta.weight, plain.weight) and torch.equal(under_meta.bias, plain.bias)


@pytest.mark.gpu
def test_a_layer_norm_problem_builds_and_checks_on_the_gpu():
    task = tasks.load(str(PROBLEMS / "layer_norm.py"))
    case = task.cases("check")[0]
    x = task.make_inputs(case, 0, "cuda")
    variant = task._variant_of(x)
    weight = variant.library_model.ln.weight
    assert weight.device.type == "cuda" and not torch.all(weight == 1)
    on_cpu = task._variant_of(task.make_inputs(case, 0, "cpu")).library_model.ln.weight
    assert torch.equal(weight.cpu(), on_cpu)
    assert task.reference(*x).device.type == "cuda"
