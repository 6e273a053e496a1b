"""Unit tests of the static guard, rule by rule, each with the file and line it names (runtime: test_guards_runtime)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from avo.evaluate import guards
from avo.evaluate.guards import Rejection
from avo.evaluate.guards.static.check import scan

REPO = Path(__file__).resolve().parents[3]
CHEATS = Path(__file__).parents[1] / "cheats"


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
    ("from nvmath.linalg.advanced import matmul\n", "gemm", "static.library_call", 1, "nvmath"),
    ("import cudnn\n", "attention", "static.library_call", 1, "cudnn"),
    # CuPy and NumPy compute where the run-time op recorder cannot see: every name reached in them must be readable.
    ("import cupy\n\ndef f(name):\n    return getattr(cupy, name)\n", "gemm", "static.library_call", 4,
     "passes cupy on as a value"),
    ("import cupy\n\ndef f(name):\n    return vars(cupy)[name]\n", "gemm", "static.library_call", 4,
     "passes cupy on as a value"),
    ("import cupy\n\ndef f(name):\n    return cupy.__dict__[name]\n", "gemm", "static.library_call", 4,
     "passes cupy on as a value"),
    ("import cupy\nmodules = [cupy]\n", "gemm", "static.library_call", 2, "passes cupy on as a value"),
    ("import cupy\n\ndef f(name):\n    return getattr(cupy.cuda, name)\n", "gemm", "static.library_call", 4,
     "passes cupy.cuda on as a value"),
    ("import cupy as cp\nx = cp.asarray([1.0])\n", "gemm", "static.library_call", 2, "CuPy only through"),
    ("from cupy import from_dlpack\n", "gemm", "static.library_call", 1, "CuPy only through"),
    ("from cupy import *\n", "gemm", "static.library_call", 1, "CuPy only through"),
    ("import numpy as np\n\ndef f(name):\n    return getattr(np, name)\n", "gemm", "static.library_call", 4,
     "passes numpy on as a value"),
    ("import numpy\n\ndef f(name):\n    return numpy.__getattribute__(name)\n", "gemm", "static.library_call", 4,
     "introspection of a library"),
    ("import numpy as np\n\ndef f(a):\n    return np.asarray(a)\n", "gemm", "static.library_call", 4,
     "NumPy array of a tensor's data"),
    ("def f(a):\n    return a.float().numpy()\n", "gemm", "static.library_call", 2, "calls .numpy()"),
    ("import numpy as np\n\ndef f(a):\n    return np.array([a.tolist()])\n", "gemm", "static.library_call", 4,
     "NumPy array of a tensor's data"),
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
    ("import torch\ntorch.os.system('ls')\n", "gemm", "static.forbidden_import", 2, "os.system"),
    ("import torch\nframe = torch.sys._getframe(1)\n", "gemm", "static.forbidden_import", 2, "sys._getframe"),
    ("import numpy\nm = numpy.sys.modules\n", "gemm", "static.forbidden_import", 2, "sys.modules"),
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
    "try:\n    import cupy\nexcept ImportError:\n    cupy = None\n\nif cupy is None or not cupy:\n    pass\n",
    "import cupy\nwith cupy.cuda.Stream():\n    n = cupy.int32(5)\ns = cupy.cuda.get_current_stream()\n"
    "k = getattr(cupy, 'RawKernel')\ncp = cupy\nm = cp.RawModule(code='')\n",
    "import numpy as np\nn = int(np.prod((2, 3)))\nt = np.zeros(2).astype(np.float32)\nu = np.array([1, 2, -3])\n",
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
        guards.check_static(folder, "gemm", kernel_required=False)  # as the built-in tasks' evaluator checks
    assert info.value.rule == "static.library_call"
    assert info.value.message == "static.library_call: kernel.py:4 calls torch.matmul (the task's library path)"
    with pytest.raises(Rejection) as info:
        guards.check_static(folder, "gemm")
    assert info.value.message.endswith("(also: kernel.py defines no kernel of its own (no @triton.jit function, no "
                                       "CUDA source): write at least the part it replaces as a kernel)")


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
    assert len(seeds) >= 6
    for seed in seeds:
        assert scan(seed, seed.parent.name) == [], seed


def test_honest_kernels_of_the_adversarial_suite_pass_the_static_checks():
    for folder in sorted(CHEATS.glob("honest_*")):
        assert scan(folder, "gemm") == [], folder
