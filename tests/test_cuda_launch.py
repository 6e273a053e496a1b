"""avo.cuda_launch: arguments packed once at their C alignment; on a GPU, a launcher called again and again, on
torch's current stream, from a thread that never touched CUDA, and on a second stream."""

from __future__ import annotations

import ctypes
import threading

import numpy
import pytest
import torch

from avo import cuda, cuda_launch
from avo.cuda_launch import pack
from avo.evaluate.worker.loader import load_entry


def test_arguments_are_packed_at_their_alignment_with_a_tensor_map_at_64():
    x = torch.zeros(4)
    args = (x, cuda.TensorMap(bytes(range(128))), 7, True, 0.5, numpy.int64(2**40), x.view(2, 2), numpy.int32(-3))
    pieces = [cuda_launch._arg_bytes(a) for a in args]
    for arg, (raw, _) in zip(args, pieces, strict=True):  # the bytes _kernel_arg's conversion has
        assert raw == cuda_launch._kernel_arg(arg).tobytes(), arg
    buffer, table = pack(pieces)
    params = list((ctypes.c_uint64 * len(pieces)).from_address(table))
    base = params[0]
    offsets = [at - base for at in params]
    # pointer 0..7, the map at the next multiple of 64, the int after it, the bool, the float at 4, the int64 at 8,
    # a pointer at 8, an int at 4
    assert offsets == [0, 64, 192, 196, 200, 208, 216, 224]
    assert base % 64 == 0
    for (raw, _), at in zip(pieces, params, strict=True):
        assert ctypes.string_at(at, len(raw)) == raw
    end = ctypes.addressof(buffer) + ctypes.sizeof(buffer)
    assert ctypes.addressof(buffer) <= base and base + 228 <= table and table + 8 * len(pieces) <= end


def test_a_module_keeps_each_launch_prepared_by_kernel_grid_and_arguments(monkeypatch, tmp_path):
    """launch() prepares once per kernel, grid, block, shared memory and arguments: tensors by address (a view of
    the same storage is the same launch), numbers by type and value, tensor maps by identity."""
    module = cuda.CudaModule(cuda.Build(tmp_path / "k.cu", tmp_path, ()))
    prepared = []
    monkeypatch.setattr(module, "launcher", lambda *args, **kw: prepared.append(args) or (lambda: None))
    x, tmap = torch.zeros(8), cuda.TensorMap(bytes(128))
    for _ in range(3):
        module.launch("k", 4, 128, (x, tmap, 3, 1.0))
    module.launch("k", 4, 128, (x.view(2, 4), tmap, 3, 1.0))
    assert len(prepared) == 1
    module.launch("k", 4, 128, (x, tmap, 3, 1))  # an int where a float was: another C type
    module.launch("k", 4, 128, (x[1:], tmap, 3, 1.0))  # another address
    module.launch("k", 4, 128, (x, cuda.TensorMap(bytes(128)), 3, 1.0))  # another map
    module.launch("k", (4, 2), 128, (x, tmap, 3, 1.0))
    module.launch("k", 4, 128, (x, tmap, 3, 1.0), shared_mem=1024)
    assert len(prepared) == 6
    module.launch("k", [4], 128, (x, tmap, 3, 1.0))  # unhashable: prepared each time, kept nowhere
    module.launch("k", [4], 128, (x, tmap, 3, 1.0))
    assert len(prepared) == 8


def test_no_arguments_pack_to_an_empty_table():
    buffer, table = pack([])
    assert ctypes.addressof(buffer) <= table <= ctypes.addressof(buffer) + ctypes.sizeof(buffer)


KERNEL = """
extern "C" __global__ void add(float* x, int n, float value) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += value;
}
extern "C" __global__ void spin(float* unused, long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}
"""


@pytest.fixture
def module(tmp_path):
    (tmp_path / "k.cu").write_text(KERNEL)
    (tmp_path / "kernel.py").write_text("from avo.cuda import load_module\nmodule = load_module('k.cu')\n\n\n"
                                        "def entry():\n    return module\n")
    return load_entry(tmp_path, "entry")()


@pytest.mark.gpu
def test_a_launcher_runs_its_kernel_each_time_it_is_called(module):
    x = torch.zeros(1000, device="cuda")
    launch = module.launcher("add", 4, 256, (x, x.numel(), 1.5))
    for _ in range(3):
        launch()
    module.launch("add", 4, 256, (x, x.numel(), 1.0))
    torch.cuda.synchronize()
    assert torch.equal(x, torch.full_like(x, 5.5))


@pytest.mark.gpu
def test_a_launcher_works_from_a_thread_that_never_touched_cuda(module):
    x = torch.zeros(256, device="cuda")
    launch = module.launcher("add", 1, 256, (x, x.numel(), 2.0))
    failures = []

    def run():
        try:
            launch()
            torch.cuda.synchronize()
        except Exception as exc:  # reported below, in the test's thread
            failures.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    assert not failures and torch.equal(x, torch.full_like(x, 2.0))


@pytest.mark.gpu
def test_a_launcher_queues_on_torchs_current_stream(module):
    """The add queued on a side stream behind a long spin has not run when the default stream is done, and has
    once the side stream is."""
    x = torch.zeros(256, device="cuda")
    side = torch.cuda.Stream()
    launch = module.launcher("add", 1, 256, (x, x.numel(), 1.0))
    with torch.cuda.stream(side):
        module.launch("spin", 1, 1, (x, numpy.int64(400_000_000)))  # about 200 ms at the H200's 1.98 GHz
        launch()
    torch.cuda.current_stream().synchronize()
    ran_early = x[0].item()  # item() syncs the default stream only
    side.synchronize()
    assert ran_early == 0.0 and x[0].item() == 1.0
