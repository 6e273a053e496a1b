"""The evaluator's dispatch modes (guards/modes.py) leave torch._dynamo unimported, and the Sentinel still tells
torch's own rebinding of torch.manual_seed, when a later import of torch._dynamo makes it, from a candidate's.

Each check runs in a fresh interpreter: in the test process another test may have imported torch._dynamo already.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _run(code: str, tmp_path: Path) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=600, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_recording_poisoning_and_the_sentinel_import_no_dynamo(tmp_path):
    # Importing torch._dynamo costs each worker about 0.9 s of CPU; torch's decorator on a mode's __torch_dispatch__
    # imported it on the first op recorded.
    out = _run(f"""
        import sys
        from pathlib import Path
        import torch
        from avo.evaluate import guards
        from avo.evaluate.worker.correctness import poison_allocations

        a = torch.randn(8, 8)
        forbidden = guards.forbidden_ops(lambda: a @ a)
        sentinel = guards.Sentinel(Path({str(tmp_path)!r}))
        with poison_allocations():
            torch.empty(4)
        guards.call_watched(lambda: a + 1, forbidden)
        sentinel.verify("check")
        print("mm" in forbidden, "torch._dynamo" in sys.modules)
    """, tmp_path)
    assert out == "True False"


def test_a_late_dynamo_import_is_torchs_rebinding_and_a_candidates_wrapper_is_not(tmp_path):
    out = _run(f"""
        import functools
        from pathlib import Path
        import torch
        from avo.evaluate import guards

        sentinel = guards.Sentinel(Path({str(tmp_path)!r}))
        original = torch.manual_seed
        import torch._dynamo  # rebinds torch.manual_seed to torch's dynamo-disabling wrapper of itself
        assert torch.manual_seed is not original
        sentinel.verify("check")

        @functools.wraps(original)
        def seeded_the_same_every_time(seed):
            return original(0)

        torch.manual_seed = seeded_the_same_every_time
        try:
            sentinel.verify("bench")
        except guards.Rejection as rejection:
            print(rejection.rule)
    """, tmp_path)
    assert out == "runtime.timer_patched"
