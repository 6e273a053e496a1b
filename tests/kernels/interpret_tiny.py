"""Run one seed on its task's tiny suite under Triton's interpreter and print one JSON line of per-case results.

    TRITON_INTERPRET=1 python tests/kernels/interpret_tiny.py TASK KERNEL_PY

Run as a child process: whether Triton interprets is fixed in part when triton is first imported (its own library
functions are decorated then), so the variable must be set before anything imports it, as the evaluator does.
"""

import importlib.util
import json
import sys

from avo.evaluate.interpreter import fix_scalar_index
from avo.tasks import load, relative_error

fix_scalar_index()  # as the evaluator's workers do (Triton <= 3.6 beside NumPy >= 2.4)
task_name, path = sys.argv[1:3]
spec = importlib.util.spec_from_file_location("seed_under_interpreter", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
task = load(task_name)
entry = getattr(module, task.entry)
rows = []
for case in task.cases("tiny"):
    inputs = task.make_inputs(case, 1234, "cpu")
    out = task.call(entry, inputs)
    shape, dtype = task.output_like(case, inputs)
    layout_ok = tuple(out.shape) == tuple(shape) and str(out.dtype) == f"torch.{dtype}" and out.is_contiguous()
    rows.append({"case": case.name, "layout_ok": layout_ok, "err": relative_error(out, task.reference(*inputs)),
                 "tol": task.tolerance(case.dtype)})
print(json.dumps(rows))
