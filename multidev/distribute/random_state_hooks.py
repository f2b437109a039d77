"""``torch.manual_seed`` / ``get_rng_state`` / ``set_rng_state`` inside ``strategy.run`` act on the
calling replica's random stream, as each DDP rank's calls act on its own generator.

Replicas on one device draw from per-replica streams (``placement/replica_random.py``), but torch's
functions of the CPU generator's state are Python functions no ``TorchFunctionMode`` sees, so inside a
replica they read and wrote the one generator every replica shares:

* ``torch.utils.checkpoint`` (``preserve_rng_state=True``, the default; Hugging Face's gradient
  checkpointing) saves ``torch.get_rng_state()`` in forward and restores it to recompute the block in
  backward: replica 1 saved the shared generator's state instead of its own, so its recomputed dropout
  masks were not its forward's and its gradient was wrong, silently;
* ``torch.manual_seed(seed + step)`` in the step re-seeded the shared generator while the other
  replicas drew from it, and left every other replica's stream as it was.

So while a strategy lives (``live_hooks``) ``install`` wraps the three (under ``torch`` and
``torch.random``): in a replica thread with a stream they go to ``ReplicaStream``; elsewhere (the
caller, a replica alone on its device, ``merge_call``) they are torch's. Autograd runs backward
with no torch function mode, where the recomputation's dropout would draw from the shared generator
(replica 0 without the lock the others swap their states under), so ``torch.random.fork_rng``, the
context checkpoint recomputes in, enters the replica's random mode there too. So does every backward a
replica runs (``torch.autograd``'s call into the engine, under ``loss.backward()`` and ``autograd.grad``):
a gradient hook adding noise (``g + sigma * torch.randn_like(g)``) or a custom ``Function``'s ``backward``
drawing took the shared generator, each replica a different noise where DDP's ranks seeded alike draw
the same. Names bound before the strategy existed (``from torch import manual_seed``) keep torch's function.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable

import torch
import torch.autograd
import torch.random

from multidev.placement.replica_random import active_stream, backward_in_replica_mode, missing_mode

_NAMES = ("manual_seed", "get_rng_state", "set_rng_state")


def _routed(name: str, original: Callable) -> Callable:
    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        stream = active_stream()
        if stream is None:
            return original(*args, **kwargs)
        return getattr(stream, name)(original, *args, **kwargs)

    call._multidev_wrapped = True
    return call


def _forked_in_replica_mode(original: Callable) -> Callable:
    @functools.wraps(original)
    @contextlib.contextmanager
    def fork_rng(*args: Any, **kwargs: Any):
        with missing_mode() or contextlib.nullcontext(), original(*args, **kwargs) as value:
            yield value

    fork_rng._multidev_wrapped = True
    return fork_rng


def install() -> Callable[[], None]:
    """Wrap the three functions in ``torch`` and ``torch.random``, ``torch.random.fork_rng``, and the
    engine call of ``torch.autograd``'s ``backward`` / ``grad``; returns how to put torch's back
    (``live_hooks.STRATEGY_HOOKS`` calls both while strategies live)."""
    originals = {}
    engine = getattr(torch.autograd, "_engine_run_backward", None)   # (torch >= 2.3)
    if engine is not None and not getattr(engine, "_multidev_wrapped", False):
        originals[torch.autograd, "_engine_run_backward"] = engine
        torch.autograd._engine_run_backward = backward_in_replica_mode(engine)
    if not getattr(torch.random.fork_rng, "_multidev_wrapped", False):
        originals[torch.random, "fork_rng"] = torch.random.fork_rng
        torch.random.fork_rng = _forked_in_replica_mode(torch.random.fork_rng)
    for module in (torch, torch.random):
        for name in _NAMES:
            fn = getattr(module, name)
            if not getattr(fn, "_multidev_wrapped", False):
                originals[module, name] = fn
                setattr(module, name, _routed(name, fn))

    def remove() -> None:
        for (module, name), fn in originals.items():
            setattr(module, name, fn)

    return remove
