"""Imported at the start of a process whose PYTHONPATH names this folder: torch reports a GPU, as on a GPU machine,
unless CUDA_VISIBLE_DEVICES hides every device (as CUDA itself reads the variable). What such a process then asks of
CUDA fails, since this torch has none: a test sees whether an interpreter worker asks."""

import os

import torch

torch.cuda.is_available = lambda: os.environ.get("CUDA_VISIBLE_DEVICES") != ""
