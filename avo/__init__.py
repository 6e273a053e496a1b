"""avo: an autonomous agent that evolves GPU kernels, scored against the vendor library on the same GPU."""

from avo.util import pyast as _pyast

__version__ = "0.1.0"

_pyast.install()  # before any of avo's threads parse (see avo/util/pyast.py)
