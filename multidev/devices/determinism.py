"""``md.config.experimental.enable_op_determinism``: torch's deterministic algorithms, TensorFlow's name.

TensorFlow then runs every op deterministically or raises for ops that have no deterministic kernel;
torch's ``use_deterministic_algorithms(True)`` does the same (a ``RuntimeError`` naming the op),
with cuDNN's autotuner off. On CUDA, cuBLAS needs ``CUBLAS_WORKSPACE_CONFIG`` set before CUDA starts:
it is set here (``:4096:8``, torch's documented value) unless the program set it.
*Differs:* TensorFlow also refuses random ops until a seed is set; torch always has a default seed,
so set one (``md.keras.utils.set_random_seed``) for runs to repeat.
"""

from __future__ import annotations

import os

import torch


def enable_op_determinism() -> None:
    """Make ops deterministic (``torch.use_deterministic_algorithms(True)``; cuDNN benchmark off)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def op_determinism_enabled() -> bool:
    """Whether ``enable_op_determinism()`` is in effect (torch's deterministic algorithms are on)."""
    return torch.are_deterministic_algorithms_enabled()
