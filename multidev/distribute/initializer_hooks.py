"""``torch.nn.init``'s random initialisers, while strategies live, draw a distributed variable's values on the host.

torch's modules initialise their weights with ``torch.nn.init`` (``init.kaiming_uniform_(self.weight, ...)``) after
registering them, and a strategy's scope has made them distributed variables by then: with replicas on GPUs the
initialiser ran on the GPU copy and drew from the CUDA generator, so ``torch.manual_seed(0)`` gave other weights
than the module made on the CPU and moved (a DDP program's ``Net().to(rank)``, and its one-device run). Some
initialisers dispatch to the variable's ``__torch_function__`` (``values/host_initializers.py`` handles those and
the in-place random methods); others allocate through the variable (``orthogonal_``'s ``tensor.new_empty``). So
each random initialiser is wrapped: on a variable off the CPU, in cross-replica context, without a generator of
the caller's, it runs on a host tensor of the variable's shape and dtype, copied in (every replica's copy).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from multidev.values import host_initializers
from multidev.values.context import current_replica_id
from multidev.values.variables import DistributedVariable

_RANDOM_INITIALISERS = ("uniform_", "normal_", "trunc_normal_", "xavier_uniform_", "xavier_normal_",
                        "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "sparse_")


def _on_host(original: Callable) -> Callable:
    @functools.wraps(original)
    def init(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(tensor, DistributedVariable) and current_replica_id() is None:
            return host_initializers.call(original, (tensor, *args), kwargs)   # (off the CPU: drawn on the host)
        return original(tensor, *args, **kwargs)

    init._multidev_wrapped = True
    return init


def install() -> Callable[[], None]:
    """Wrap the random initialisers of ``torch.nn.init``; returns how to put torch's back."""
    originals = {}
    for name in _RANDOM_INITIALISERS:
        fn = getattr(torch.nn.init, name, None)
        if fn is not None and not getattr(fn, "_multidev_wrapped", False):
            originals[name] = fn
            setattr(torch.nn.init, name, _on_host(fn))

    def remove() -> None:
        for name, fn in originals.items():
            setattr(torch.nn.init, name, fn)

    return remove


__all__ = ["install"]
