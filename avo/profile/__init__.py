"""Where the time goes and what the compiler made: Nsight Compute summaries and compile facts for a candidate."""

from avo.errors import UserError


class ProfileError(UserError):
    """Profiling or compile inspection could not give an answer; the message says why in one line."""

    detail: str = ""
    """More text for a reader who can use it (the candidate's traceback); the message stands without it."""
