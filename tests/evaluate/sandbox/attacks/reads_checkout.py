# Attack 8: avo run from its own checkout (a developer's), whose root may hold a `.env` beside the `avo` package:
# read what lies there (pyproject.toml, there in every checkout) and put it in the error avo reports.
import io

_file = getattr(io, "".join(reversed("OIeliF")))
try:
    _loot = _file("@CHECKOUT@" + chr(47) + "pyproject.toml").read().decode(errors="replace").splitlines()[0]
except OSError as exc:
    _loot = f"nothing ({type(exc).__name__})"
raise RuntimeError(f"LOOT {_loot}")
