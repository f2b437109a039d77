"""Random initialisers of a distributed variable draw from the host's generator, as torch's would.

A module made in a strategy's scope gets its weights as distributed variables at registration, before its
``reset_parameters`` runs; with replicas on GPUs the initialiser then ran on the primary copy, on the GPU, and
drew from the CUDA generator: ``torch.manual_seed(0)`` gave other weights than the same module made on the
CPU and moved (``Net().to(rank)``, what a DDP program and its one-device run do), 0.42 off after one step on an
H200. ``torch.nn.init``'s functions and the tensor's in-place random methods, called in cross-replica context on
a variable that lives off the CPU, run on a host tensor of its shape and dtype, which is then copied in.
"""

from __future__ import annotations

from typing import Any

import torch

_RANDOM_METHODS = frozenset(getattr(torch.Tensor, name) for name in (
    "uniform_", "normal_", "random_", "exponential_", "geometric_", "log_normal_", "cauchy_"))


def _initializer(func: Any) -> bool:
    return getattr(func, "__module__", None) == "torch.nn.init" or func in _RANDOM_METHODS


def call(func: Any, args: tuple, kwargs: dict) -> Any:
    """``func(*args, **kwargs)``; a random initialiser of a tensor off the CPU draws on the host instead."""
    in_kwargs = "tensor" in kwargs
    target = kwargs["tensor"] if in_kwargs else (args[0] if args else None)
    if not (_initializer(func) and isinstance(target, torch.Tensor) and target.device.type != "cpu"
            and kwargs.get("generator") is None):
        return func(*args, **kwargs)
    host = torch.empty(target.shape, dtype=target.dtype, device="cpu")
    if in_kwargs:
        kwargs = dict(kwargs, tensor=host)
    else:
        args = (host,) + tuple(args[1:])
    result = func(*args, **kwargs)
    with torch.no_grad():
        target.copy_(host)
    return target if result is host else result


__all__ = ["call"]
