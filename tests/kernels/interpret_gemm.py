"""Run a GEMM kernel on the given M,N,K shapes (fp16) under Triton's interpreter; print one JSON line of relative
errors against a float64 product. For shapes the tiny suite lacks, such as 16-byte-aligned rows that take a seed's
tensor-descriptor path.

    TRITON_INTERPRET=1 python tests/kernels/interpret_gemm.py KERNEL_PY M,N,K [M,N,K ...]
"""

import importlib.util
import json
import sys

import torch

from avo.evaluate.interpreter import fix_scalar_index
from avo.tasks import relative_error

fix_scalar_index()  # as the evaluator's workers do (Triton <= 3.6 beside NumPy >= 2.4)
spec = importlib.util.spec_from_file_location("gemm_under_interpreter", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
gen = torch.Generator().manual_seed(1234)
rows = []
for shape in sys.argv[2:]:
    m, n, k = (int(x) for x in shape.split(","))
    a = torch.randn((m, k), generator=gen, dtype=torch.float16)
    b = torch.randn((k, n), generator=gen, dtype=torch.float16)
    out = module.gemm(a, b)
    rows.append({"shape": shape, "err": relative_error(out, a.double() @ b.double()),
                 "layout_ok": tuple(out.shape) == (m, n) and out.dtype == torch.float16 and out.is_contiguous()})
print(json.dumps(rows))
