"""Where the time goes and what the compiler made: Nsight Compute summaries and compile facts for a candidate.

- `ncu.py`: Nsight Compute run on one bench case (`driver.py` is the program it profiles); `ncu_report.py` parses its
  CSV, `ncu_summary.py` boils it down to the lines an agent reads.
- `compiler.py`: compile facts (registers, spills, shared memory, instruction mix) for Triton (`triton_capture.py`,
  compiled for the target in a child process) and CUDA sources (nvcc); `sass.py` reads SASS and PTX.
- `confine.py`: the children that run a candidate's code (ncu's driver, the compile capture) inside the OS sandbox.
The agent reaches these through avo/agent/tools/profile.py.
"""

from avo.errors import UserError


class ProfileError(UserError):
    """Profiling or compile inspection could not give an answer; the message says why in one line."""

    detail: str = ""
    """More text for a reader who can use it (the candidate's traceback); the message stands without it."""
