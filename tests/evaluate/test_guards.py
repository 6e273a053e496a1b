"""Unit tests of the guards: the static checker rule by rule (with the line it names), and the runtime pieces."""

from __future__ import annotations

import os

if "triton" not in __import__("sys").modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # read when triton is first imported (torch._dynamo imports it)

import importlib.util
import itertools
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch

from avo.evaluate import guards
from avo.evaluate.guards import Rejection
from avo.evaluate.guards_static import scan

REPO = Path(__file__).resolve().parents[2]
CHEATS = Path(__file__).parent / "cheats"


def _candidate(tmp_path: Path, source: str, name: str = "kernel.py", **others: str) -> Path:
    folder = tmp_path / "cand"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(textwrap.dedent(source))
    for fname, text in others.items():
        (folder / fname).write_text(textwrap.dedent(text))
    return folder


def _first(tmp_path: Path, source: str, task: str = "gemm", **others: str):
    findings = scan(_candidate(tmp_path, source, **others), task)
    return (findings[0].rule, findings[0].line, findings[0].what) if findings else None


# -- static: each rule, with the line it names ----------------------------------------------------------------------
VIOLATIONS = [
    # (source, task, rule, line, phrase)
    ("import torch\n\ndef gemm(a, b):\n    return torch.matmul(a, b)\n", "gemm", "static.library_call", 4,
     "calls torch.matmul"),
    ("from torch import matmul as f\n", "gemm", "static.library_call", 1, "imports torch.matmul"),
    ("import torch\nmm = torch.mm\n", "gemm", "static.library_call", 2, "torch.mm"),
    ("import torch\nx = 1\nf = getattr(torch, 'mat' + 'mul')\n", "gemm", "static.library_call", 3, "torch.matmul"),
    ("import torch\nf = getattr(torch, ''.join(['ein', 'sum']))\n", "gemm", "static.library_call", 2, "torch.einsum"),
    ("import importlib\nt = importlib.import_module('torch')\nf = t.addmm\n", "gemm", "static.library_call", 3,
     "torch.addmm"),
    ("import importlib\nF = importlib.import_module('torch.nn.functional')\ny = F.linear\n", "gemm",
     "static.library_call", 3, "torch.nn.functional.linear"),
    ("import torch\nop = torch.ops.aten.mm.default\n", "gemm", "static.library_call", 2, "torch.ops.aten.mm"),
    ("import torch\nop = vars(torch)['baddbmm']\n", "gemm", "static.library_call", 2, "torch.baddbmm"),
    ("def gemm(a, b):\n    return a @ b\n", "gemm", "static.library_call", 2, "@ operator"),
    ("def gemm(a, b):\n    a @= b\n    return a\n", "gemm", "static.library_call", 2, "@= operator"),
    ("def gemm(a, b):\n    return a.matmul(b)\n", "gemm", "static.library_call", 2, ".matmul()"),
    ("def gemm(a, b):\n    return a.__matmul__(b)\n", "gemm", "static.library_call", 2, ".__matmul__()"),
    ("import numpy as np\nc = np.dot\n", "gemm", "static.library_call", 2, "numpy.dot"),
    ("import cupy\nc = cupy.matmul\n", "gemm", "static.library_call", 2, "cupy.matmul"),
    ("import operator\nf = operator.matmul\n", "gemm", "static.library_call", 2, "operator.matmul"),
    ("import torch.nn.functional as F\n\ndef f(x):\n    return F.softmax(x, -1)\n", "attention",
     "static.library_call", 1, "torch.nn.functional"),
    ("def f(s):\n    return s.softmax(-1)\n", "attention", "static.library_call", 2, ".softmax()"),
    ("import flash_attn\n", "attention", "static.library_call", 1, "flash_attn"),
    ("import subprocess\n", "gemm", "static.forbidden_import", 1, "imports subprocess"),
    ("x = 1\nimport ctypes\n", "gemm", "static.forbidden_import", 2, "ctypes"),
    ("from multiprocessing import Pool\n", "gemm", "static.forbidden_import", 1, "multiprocessing"),
    ("import concurrent.futures\n", "gemm", "static.forbidden_import", 1, "concurrent"),
    ("import pickle\n", "gemm", "static.forbidden_import", 1, "pickle"),
    ("from avo.tasks import gemm\n", "gemm", "static.forbidden_import", 1, "avo.tasks"),
    ("import os\nos.system('nvcc x.cu')\n", "gemm", "static.forbidden_import", 2, "os.system"),
    ("from os import popen\n", "gemm", "static.forbidden_import", 1, "os.popen"),
    ("import os\nos.write(3, b'{}')\nos._exit(0)\n", "gemm", "static.forbidden_import", 2, "os.write"),
    ("import queue\nT = queue.threading.Thread\n", "gemm", "static.forbidden_import", 2, "threading"),
    ("import importlib\nm = importlib.import_module('sub' + 'process')\n", "gemm", "static.forbidden_import", 2,
     "subprocess"),
    ("m = __import__('torch')\n", "gemm", "static.forbidden_import", 1, "__import__"),
    ("import importlib\n\ndef load(name):\n    return importlib.import_module(name)\n", "gemm",
     "static.forbidden_import", 4, "computed module"),
    ("import sys\nt = sys.modules['torch']\n", "gemm", "static.forbidden_import", 2, "sys.modules"),
    ("x = ().__class__.__base__.__subclasses__()\n", "gemm", "static.forbidden_import", 1, "__subclasses__"),
    ("from torch.utils._python_dispatch import _disable_current_modes\n", "gemm", "static.forbidden_import", 1,
     "_python_dispatch"),
    ("exec('x = 1')\n", "gemm", "static.runtime_compile", 1, "builtins.exec"),
    ("f = eval\n", "gemm", "static.runtime_compile", 1, "builtins.eval"),
    ("from torch.utils.cpp_extension import load_inline\n", "gemm", "static.runtime_compile", 1, "cpp_extension"),
    ("import torch\nk = torch.compile(lambda x: x)\n", "gemm", "static.runtime_compile", 2, "torch.compile"),
    ("import cupy\nk = cupy.ElementwiseKernel('x', 'y', 'y = x')\n", "gemm", "static.runtime_compile", 2,
     "ElementwiseKernel"),
    ("import torch\n\ndef gemm(a, b):\n    try:\n        return k(a, b)\n    except Exception:\n"
     "        return torch.mm(a, b)\n", "gemm", "static.torch_fallback", 7, "except handler"),
    ("import torch\n\ndef gemm(a, b):\n    try:\n        return k(a, b)\n    except RuntimeError:\n"
     "        return (a.float() @ b.float()).to(a.dtype)\n", "gemm", "static.torch_fallback", 7, "@ operator"),
    ("import torch\n\ndef f(a):\n    try:\n        return k(a)\n    except Exception:\n"
     "        return torch.exp(a)\n", "gemm", "static.torch_fallback", 7, "torch.exp"),
    ("text = open('/etc/passwd').read()\n", "gemm", "static.file_access", 1, "absolute path"),
    ("from pathlib import Path\nHERE = Path(__file__).parent\nx = (HERE.parent / 'ref.py').read_text()\n", "gemm",
     "static.file_access", 3, "parent of the candidate's folder"),
    ("from pathlib import Path\nx = Path(__file__).parents[1].joinpath('a').read_bytes()\n", "gemm",
     "static.file_access", 2, "parent"),
    ("import os\np = os.path.join(os.path.dirname(__file__), '..', 'x')\nf = open(p, 'w')\n", "gemm",
     "static.file_access", 3, "parent"),
    ("from pathlib import Path\nHERE = Path(__file__).parent\nf = open(f'{HERE}_sibling/x')\n", "gemm",
     "static.file_access", 3, "outside"),
    ("from pathlib import Path\nPath.home().joinpath('x').write_text('1')\n", "gemm", "static.file_access", 2,
     "home folder"),
    ("def save(path, data):\n    with open(path, 'wb') as f:\n        f.write(data)\n", "gemm", "static.file_access", 2,
     "not known to be inside"),
    ("import shutil\nshutil.copy('kernel.py', '../x.py')\n", "gemm", "static.file_access", 2, "parent"),
]


@pytest.mark.parametrize("source,task,rule,line,phrase", VIOLATIONS)
def test_static_rule_names_the_line(tmp_path, source, task, rule, line, phrase):
    found = _first(tmp_path, source, task)
    assert found is not None, "not caught"
    assert found[:2] == (rule, line), found
    assert phrase in found[2]


ALLOWED = [
    # Triton kernel bodies: tl.dot and @ on tl tensors are the point.
    "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x):\n    a = tl.load(x)\n"
    "    acc = tl.dot(a, a)\n    acc += a @ a\n",
    "from triton import jit\nimport triton.language as tl\n\n@jit\ndef k(x):\n    a = tl.load(x)\n    b = a @ a\n",
    "import triton\n\n@triton.autotune(configs=[], key=[])\n@triton.jit\ndef k(x):\n    y = x @ x\n",
    # Files next to the kernel, reached from __file__.
    "from pathlib import Path\nHERE = Path(__file__).resolve().parent\nsrc = (HERE / 'k.cu').read_text()\n"
    "other = Path(__file__).with_name('k.cu').read_text()\n",
    "import os\nsrc = open(os.path.join(os.path.dirname(__file__), 'sub', 'k.cu')).read()\n",
    "from pathlib import Path\nHERE = Path(__file__).parent\nsrc = open(f'{HERE}/k.cu').read()\n",
    "import tempfile\nfrom pathlib import Path\nd = Path(tempfile.mkdtemp())\n(d / 'x').write_text('1')\n",
    # Optional imports, dtype lookups, innocent names.
    "try:\n    import cupy\nexcept ImportError:\n    cupy = None\n",
    "import torch\n\ndef dtype(name):\n    return getattr(torch, name)\n",
    "import re\npat = re.compile('x')\ns = 'a'.replace('a', 'b')\n",
    "def f(pid_m, pid_n):\n    mm = pid_m * 2\n    dot = mm + pid_n\n    return dot\n",
    "import cupy\nmod = cupy.RawModule(code='extern \"C\" __global__ void k() {}', options=('-arch=sm_90a',))\n"
    "k = cupy.RawKernel('x', 'k')\n",
    "import torch\n\ndef gemm(a, b):\n    try:\n        return k(a, b)\n    except Exception as exc:\n"
    "        torch.cuda.synchronize()\n        raise RuntimeError('kernel failed') from exc\n",
    "import torch.nn.functional as F\n\ndef pad(x):\n    return F.pad(x, (0, 1))\n",  # gemm: padding is no GEMM
]


@pytest.mark.parametrize("source", ALLOWED)
def test_static_allows_honest_constructs(tmp_path, source):
    assert _first(tmp_path, source) is None


def test_rejection_message_names_rule_file_and_line(tmp_path):
    folder = _candidate(tmp_path, "import torch\n\ndef gemm(a, b):\n    return torch.matmul(a, b)\n")
    with pytest.raises(Rejection) as info:
        guards.check_static(folder, "gemm")
    assert info.value.rule == "static.library_call"
    assert info.value.message == "static.library_call: kernel.py:4 calls torch.matmul (the task's library path)"


def test_every_python_file_is_read_and_named(tmp_path):
    folder = _candidate(tmp_path, "from helper import go\n", **{"helper.py": "x = 1\nimport socket\n"})
    with pytest.raises(Rejection) as info:
        guards.check_static(folder, "gemm")
    assert info.value.rule == "static.forbidden_import" and "helper.py:2" in info.value.message


@pytest.mark.parametrize("name", ["helper.so", "mod.cpython-311-x86_64-linux-gnu.so", "k.pyc", "evil.pth", "lib.zip"])
def test_compiled_modules_and_archives_are_refused(tmp_path, name):
    folder = _candidate(tmp_path, "x = 1\n")
    (folder / name).write_bytes(b"\x7fELF")
    with pytest.raises(Rejection) as info:
        guards.check_static(folder, "gemm")
    assert info.value.rule == "static.forbidden_import" and name in info.value.message


def test_syntax_errors_are_left_to_the_loader(tmp_path):
    assert scan(_candidate(tmp_path, "def gemm(a, b)\n    return a\n"), "gemm") == []


CUDA_VIOLATIONS = [
    ('#include <cstdio>\nextern "C" void h() { FILE* f = fopen("/tmp/x", "w"); }\n', "static.file_access", 2),
    ('extern "C" void h() {\n  system("nvcc x.cu");\n}\n', "static.forbidden_import", 2),
    ("#include <cublas_v2.h>\n", "static.library_call", 1),
    ("void h(cudaStream_t s) {\n  cudaLaunchHostFunc(s, cb, 0);\n}\n", "static.forbidden_import", 2),
    ("#include <thread>\n", "static.forbidden_import", 1),
]


@pytest.mark.parametrize("source,rule,line", CUDA_VIOLATIONS)
def test_cuda_sources_are_scanned(tmp_path, source, rule, line):
    findings = scan(_candidate(tmp_path, "x = 1\n", **{"k.cu": source}), "gemm")
    assert findings and (findings[0].rule, findings[0].file, findings[0].line) == (rule, "k.cu", line)


def test_cuda_comments_and_strings_do_not_count(tmp_path):
    source = '// system("rm -rf /") in a comment\n/* fopen( */\n__global__ void k() { printf("fopen(x)"); }\n'
    assert scan(_candidate(tmp_path, "x = 1\n", **{"k.cu": source}), "gemm") == []


def test_shipped_seeds_pass_the_static_checks():
    seeds = [p for p in sorted((REPO / "kernels").glob("*/*")) if (p / "kernel.py").is_file()]
    if not seeds:
        pytest.skip("no seed kernels in this checkout")
    for seed in seeds:
        assert scan(seed, seed.parent.name) == [], seed


def test_honest_kernels_of_the_adversarial_suite_pass_the_static_checks():
    for folder in sorted(CHEATS.glob("honest_*")):
        assert scan(folder, "gemm") == [], folder


# -- runtime: the op recorder ---------------------------------------------------------------------------------------
def _inputs():
    gen = torch.Generator().manual_seed(0)
    return torch.randn(8, 16, generator=gen), torch.randn(16, 4, generator=gen)


def test_forbidden_ops_are_the_reference_compute_ops_and_their_family():
    a, b = _inputs()
    ops = guards.forbidden_ops(lambda: torch.matmul(a.double(), b.double()))
    assert {"mm", "bmm", "addmm", "convolution", "linear"} <= ops
    assert not ops & {"_to_copy", "empty", "copy_", "view", "t"}
    assert "_softmax" not in ops


@pytest.mark.parametrize("spelling", [
    lambda a, b: getattr(a, "".join(reversed("lumtam")))(b),
    lambda a, b: torch.ops.aten.mm.default(a, b),
    lambda a, b: a.__matmul__(b),
    lambda a, b: torch.einsum("ik,kj->ij", a, b),
    lambda a, b: torch.nn.functional.conv1d(a.t()[None], b.t()[:, :, None])[0].t(),
])
def test_call_watched_rejects_library_work_however_spelled(spelling):
    a, b = _inputs()
    forbidden = guards.forbidden_ops(lambda: torch.matmul(a.double(), b.double()))
    with pytest.raises(Rejection) as info:
        guards.call_watched(lambda: spelling(a, b), forbidden)
    assert info.value.rule == "runtime.library_op"


def test_call_watched_rejects_even_when_the_call_then_raises():
    a, b = _inputs()
    forbidden = guards.forbidden_ops(lambda: torch.matmul(a, b))

    def cheat():
        torch.mm(a, b)
        raise ValueError("pretend the kernel failed")

    with pytest.raises(Rejection):
        guards.call_watched(cheat, forbidden)


def test_call_watched_passes_plumbing_and_returns_the_output():
    a, b = _inputs()
    forbidden = guards.forbidden_ops(lambda: torch.matmul(a, b))
    out = guards.call_watched(lambda: torch.empty(8, 4).copy_(torch.zeros(8, 4)).contiguous(), forbidden)
    assert out.shape == (8, 4)


def test_triton_kernel_under_the_interpreter_dispatches_no_compute_op():
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("triton was imported without the interpreter before this module")
    spec = importlib.util.spec_from_file_location("honest_tiled_kernel", CHEATS / "honest_tiled" / "kernel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(33, 40, generator=gen, dtype=torch.float16)
    b = torch.randn(40, 17, generator=gen, dtype=torch.float16)
    forbidden = guards.forbidden_ops(lambda: torch.matmul(a.double(), b.double()))
    out = guards.call_watched(lambda: module.gemm(a, b), forbidden)
    assert torch.allclose(out.float(), a.float() @ b.float(), atol=1e-2, rtol=1e-2)


# -- runtime: output type and inputs --------------------------------------------------------------------------------
class _Sub(torch.Tensor):
    pass


class _Liar(torch.Tensor):
    @property
    def __class__(self):
        return torch.Tensor


@pytest.mark.parametrize("make", [
    lambda: torch.zeros(2, 3).as_subclass(_Sub),
    lambda: torch.zeros(2, 3).as_subclass(_Liar),
    lambda: torch.nn.Parameter(torch.zeros(2)),
    lambda: [torch.zeros(2)],
    lambda: torch.zeros(2, 3).to_sparse(),
    lambda: torch.empty(2, 3, device="meta"),
])
def test_output_type_rejects_anything_but_a_plain_dense_tensor(make):
    with pytest.raises(Rejection) as info:
        guards.check_output_type(make())
    assert info.value.rule == "runtime.output_type"


def test_output_type_accepts_plain_tensors_and_their_views():
    guards.check_output_type(torch.zeros(4, 4))
    guards.check_output_type(torch.zeros(4, 4)[1:].t())


def test_inputs_unchanged_passes_untouched_inputs_even_with_nan():
    a = torch.tensor([1.0, float("nan"), -0.0])
    before = guards.fingerprint((a, True, 0.5))
    guards.check_inputs_unchanged(before, (a, True, 0.5))


@pytest.mark.parametrize("mutate", [
    lambda a: a.add_(1e-3),
    lambda a: a[0, 2].copy_(torch.tensor(0.0)),  # -0.0 -> +0.0: equal as numbers, not as bits
    lambda a: a.t_(),
    lambda a: a.set_(torch.zeros(2, 3)),
    lambda a: a.resize_(6),
])
def test_inputs_unchanged_sees_values_bits_and_metadata(mutate):
    a = torch.tensor([[1.0, 2.0, -0.0], [3.0, 4.0, 5.0]])
    before = guards.fingerprint((a,))
    mutate(a)
    with pytest.raises(Rejection) as info:
        guards.check_inputs_unchanged(before, (a,))
    assert info.value.rule == "runtime.input_mutated"


# -- runtime: the Sentinel ------------------------------------------------------------------------------------------
_counter = itertools.count()


@pytest.fixture
def watched(tmp_path):
    """A candidate folder with a Sentinel on it; `load(source)` imports a kernel.py from that folder."""
    folder = tmp_path / "cand"
    folder.mkdir()
    sentinel = guards.Sentinel(folder)

    def load(source: str):
        path = folder / f"k{next(_counter)}.py"
        path.write_text(textwrap.dedent(source))
        spec = importlib.util.spec_from_file_location(path.stem + "_guard_test", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    yield sentinel, load, folder
    sentinel.close()


def _verdict(sentinel) -> Rejection | None:
    try:
        sentinel.verify("check")
    except Rejection as exc:
        return exc
    return None


def test_sentinel_is_quiet_when_nothing_happened(watched):
    sentinel, load, _ = watched
    module = load("import torch\n\ndef go():\n    return torch.ones(3) * 2\n")
    module.go()
    assert _verdict(sentinel) is None


@pytest.mark.parametrize("target,attr", [
    (time, "perf_counter"), (time, "monotonic"), (torch.cuda, "synchronize"), (torch.cuda.Event, "elapsed_time"),
    (torch.cuda.Event, "record"), (torch.linalg, "vector_norm"), (torch, "isfinite"), (torch.Tensor, "__sub__"),
])
def test_sentinel_sees_a_replaced_timer_or_scoring_function(watched, target, attr):
    sentinel, _, _ = watched
    had = attr in vars(target)
    original = vars(target).get(attr)
    setattr(target, attr, lambda *a, **k: 0.0)
    try:
        found = _verdict(sentinel)
    finally:
        if had:
            setattr(target, attr, original)
        else:
            delattr(target, attr)
    assert found is not None and found.rule == "runtime.timer_patched" and attr in found.message
    assert _verdict(sentinel) is None


def test_sentinel_sees_a_disguised_replacement_and_a_swapped_module(watched):
    import functools

    sentinel, load, _ = watched
    original = torch.linalg.vector_norm
    fake = functools.wraps(original)(lambda *a, **k: torch.tensor(0.0))
    torch.linalg.vector_norm = fake
    try:
        assert _verdict(sentinel).rule == "runtime.timer_patched"
    finally:
        torch.linalg.vector_norm = original
    real_time = sys.modules["time"]
    sys.modules["time"] = type(sys)("time")
    try:
        assert _verdict(sentinel).rule == "runtime.timer_patched"
    finally:
        sys.modules["time"] = real_time


def test_sentinel_ignores_torch_rebinding_its_own_functions(watched):
    """torch swaps some functions for wrappers of themselves on first use; that is not a candidate's patch."""
    sentinel, _, _ = watched
    original = torch.manual_seed
    torch.manual_seed = torch._disable_dynamo(getattr(original, "__wrapped__", original))
    try:
        assert torch.manual_seed is not original
        assert _verdict(sentinel) is None
    finally:
        torch.manual_seed = original


def test_sentinel_sees_a_thread_even_after_it_ended(watched):
    sentinel, load, _ = watched
    module = load("import threading\n\ndef go():\n    t = threading.Thread(target=lambda: None)\n"
                  "    t.start()\n    t.join()\n")
    module.go()
    found = _verdict(sentinel)
    assert found is not None and found.rule == "runtime.thread" and "k" in found.message


def test_sentinel_sees_a_live_low_level_thread(watched):
    sentinel, load, _ = watched
    module = load("import _thread\nimport time\nstop = []\n\ndef spin():\n    while not stop:\n"
                  "        time.sleep(0.01)\n\ndef go():\n    _thread.start_new_thread(spin, ())\n")
    module.go()
    time.sleep(0.1)
    try:
        found = _verdict(sentinel)
    finally:
        module.stop.append(1)
    assert found is not None and found.rule == "runtime.thread"


def test_sentinel_refuses_and_reports_a_write_outside_the_folder(watched, tmp_path):
    sentinel, load, folder = watched
    outside = REPO / f".guard-test-{os.getpid()}.txt"
    module = load("def go(path):\n    open(path, 'w').write('x')\n")
    with pytest.raises(Rejection) as info:
        module.go(str(outside))
    assert info.value.rule == "runtime.file_access" and not outside.exists()
    assert _verdict(sentinel).rule == "runtime.file_access"


def test_sentinel_allows_writes_in_the_folder_and_the_temp_folder(watched, tmp_path):
    sentinel, load, folder = watched
    module = load("import tempfile\n\ndef go(path):\n    open(path, 'w').write('x')\n"
                  "    with tempfile.NamedTemporaryFile('w') as f:\n        f.write('y')\n")
    module.go(str(folder / "cache.bin"))
    assert _verdict(sentinel) is None


def test_sentinel_refuses_a_process_started_by_the_candidate(watched, tmp_path):
    sentinel, load, _ = watched
    marker = tmp_path / "spawned"
    module = load("import subprocess\n\ndef go(marker):\n    subprocess.run(['touch', marker])\n")
    with pytest.raises(Rejection):
        module.go(str(marker))
    assert not marker.exists()
    assert _verdict(sentinel).rule == "runtime.file_access"


def test_sentinel_does_not_blame_a_library_for_its_own_processes(watched, tmp_path):
    sentinel, load, _ = watched
    library = tmp_path / "lib" / "fake_library.py"
    library.parent.mkdir()
    library.write_text("import subprocess\n\ndef build():\n    subprocess.run(['true'])\n")
    spec = importlib.util.spec_from_file_location("fake_library", library)
    fake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake)
    module = load("def go(build):\n    build()\n")
    module.go(fake.build)
    assert _verdict(sentinel) is None
