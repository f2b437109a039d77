"""Whether a replica's gradients are summed across replicas is their type, never a flag.

``LocalGrads`` are one replica's own gradients (its share of the global batch); ``SummedGrads`` are
the sums over every replica, identical on every replica (or, from a split update's reduce, this
replica's share of those sums: ``None`` where another replica applies the update). The update
engine (``distribute/replica_update``) sums ``LocalGrads`` into ``SummedGrads``, applies only
``SummedGrads`` and applies ``LocalGrads`` only through its explicit "each replica its own" entry
point (TensorFlow's ``skip_gradients_aggregation=True``). ``ReplicaStep.gradients`` holds the class
of what a replica's ``p.grad`` holds in the current step (``SummedGrads`` once ``loss.backward()``
reduced them).

Both hold a tuple aligned with the variables they are for; ``None`` where a variable has no
gradient. Whether the engine may sum into a tensor in place is a property of its origin, not of
these values: a tensor that is the replica copy's own ``.grad`` (as DDP's reducer writes into it).

Example:
    >>> summed = SummedGrads((torch.ones(2),))
    >>> isinstance(summed, LocalGrads)
    False
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class _Grads:
    """One gradient (or None) per variable, in the variables' order."""

    tensors: tuple


@dataclass(frozen=True, slots=True)
class LocalGrads(_Grads):
    """This replica's own gradients, not summed across replicas."""


@dataclass(frozen=True, slots=True)
class SummedGrads(_Grads):
    """Gradients summed across replicas (identical on every replica, but for a split update's shares)."""


__all__ = ["LocalGrads", "SummedGrads"]
