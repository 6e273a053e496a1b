"""avo: an autonomous agent that evolves GPU kernels, scored against the vendor library on the same GPU."""

__version__ = "0.1.0"
