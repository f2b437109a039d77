"""Values with one component per replica: ``PerReplica`` (different) and ``Mirrored`` (equal)."""

from __future__ import annotations

import abc
from typing import Any, Sequence


class DistributedValues:
    """Base of values holding one component per replica; ``.values`` is the tuple of components."""

    __slots__ = ("_values",)

    def __init__(self, values: Sequence[Any]):
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
            raise ValueError(
                f"{type(self).__name__} needs a non-empty tuple of per-replica values, got {values!r}."
            )
        self._values = tuple(values)

    @property
    def values(self) -> tuple:
        return self._values

    def _local(self, replica_id: int) -> Any:
        return self._values[replica_id]

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        body = ",\n".join(f"  {i}: {v!r}" for i, v in enumerate(self._values))
        return f"{type(self).__name__}:{{\n{body}\n}}"

    def __iter__(self):
        raise TypeError(
            f"{type(self).__name__} is not iterable: use strategy.experimental_local_results(value) "
            "to get the per-replica components, or .values."
        )

    def __copy__(self):
        return type(self)(self._values)

    def __deepcopy__(self, memo):
        import copy
        return type(self)(copy.deepcopy(self._values, memo))

    def __reduce_ex__(self, protocol):
        """Refused at save time: PyTorch's checkpoint recipe saves ``'loss': loss``, which under a strategy
        is ``strategy.run``'s per-replica result; pickled, ``torch.load(PATH, weights_only=True)`` would
        refuse the file only in the resumed run."""
        raise TypeError(
            f"Cannot pickle a {type(self).__name__} (one value per replica, as strategy.run returns them): "
            "torch.load(..., weights_only=True) could not read it back. Save one tensor instead: "
            "strategy.reduce('mean', value, axis=None) for the global mean, "
            "strategy.experimental_local_results(value)[0] for replica 0's, or save inside strategy.run "
            "(the replica's own tensor) under `if md.distribute.get_replica_context().replica_id_in_sync_group == 0:`."
        )


class PerReplica(DistributedValues):
    """Components that may differ between replicas (inputs, per-replica results)."""

    __slots__ = ()


class Mirrored(DistributedValues):
    """Components known to be equal on every replica (results of a reduction)."""

    __slots__ = ()


class PerReplicaSpec:
    """The spec of a ``PerReplica`` value: one component spec per replica (TF's ``PerReplicaSpec``),
    what a distributed dataset's (and its iterator's) ``element_spec`` holds at each leaf.

        >>> dist.element_spec == iter(dist).element_spec
        True
    """

    __slots__ = ("_value_specs",)

    def __init__(self, *value_specs: Any):
        self._value_specs = tuple(value_specs)

    @property
    def value_specs(self) -> tuple:
        return self._value_specs

    def __len__(self) -> int:
        return len(self._value_specs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PerReplicaSpec):
            return NotImplemented
        return self._value_specs == other._value_specs

    def __hash__(self) -> int:
        return hash(self._value_specs)

    def __repr__(self) -> str:
        return f"PerReplicaSpec({', '.join(repr(s) for s in self._value_specs)})"


class AnyDistributedValue(abc.ABC):
    """The public ``md.distribute.DistributedValues``: ``isinstance`` is True for ``PerReplica`` and
    ``Mirrored`` values and for distributed variables (``MirroredVariable``, ...), as in TensorFlow.

    Internal code checks the concrete ``DistributedValues`` base instead: a variable is not a value
    to split per replica.

        >>> isinstance(mirrored_variable, md.distribute.DistributedValues)
        True
    """


AnyDistributedValue.register(DistributedValues)


def local_value(value: Any, replica_id: int) -> Any:
    """Replica ``replica_id``'s component of ``value`` (nested structures are walked)."""
    return map_structure(lambda v: v._local(replica_id) if isinstance(v, DistributedValues) else v, value)


from torch import Size as _TorchSize  # noqa: E402  (a shape is one leaf of a structure, below)


def map_structure(fn, value: Any) -> Any:
    """Apply ``fn`` to every leaf of nested tuples/lists/dicts (namedtuples kept)."""
    if isinstance(value, dict):
        return type(value)((k, map_structure(fn, v)) for k, v in value.items())
    if isinstance(value, _TorchSize):   # a shape is one value (torch.Size cannot hold PerReplica parts)
        return fn(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # namedtuple
        return type(value)(*(map_structure(fn, v) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(map_structure(fn, v) for v in value)
    return fn(value)


def flatten(value: Any) -> list:
    """Leaves of a nested structure in a fixed order."""
    out: list = []
    map_structure(out.append, value)
    return out


def pack_as(structure: Any, leaves: Sequence[Any]) -> Any:
    """Rebuild ``structure`` with ``leaves`` in ``flatten`` order."""
    it = iter(leaves)
    return map_structure(lambda _: next(it), structure)


class ReplicaResultsMismatchError(ValueError, AssertionError):
    """Replicas returned differently structured results: a ``ValueError``, and the ``AssertionError``
    TensorFlow's ``regroup`` raises, so programs written for either catch it."""


def _shape_of(value: Any) -> Any:
    """The structure of ``value`` without its leaves (dict keys, sequence types and lengths)."""
    return map_structure(lambda _: None, value)


def check_same_structure(per_replica_outputs: Sequence[Any], who: str) -> None:
    """Refuse outputs whose structures differ between replicas (zipping them would drop leaves)."""
    shapes = [_shape_of(o) for o in per_replica_outputs]
    mismatched = [r for r, shape in enumerate(shapes) if shape != shapes[0] or type(shape) is not type(shapes[0])]
    if mismatched:
        raise ReplicaResultsMismatchError(
            f"{who} returned differently structured results: replica 0 returned {shapes[0]!r} and "
            f"replica {mismatched[0]} {shapes[mismatched[0]]!r} (leaves shown as None). Every replica must "
            "return the same structure (same dict keys, same sequence lengths).")


def regroup(per_replica_outputs: Sequence[Any]) -> Any:
    """Turn one output structure per replica into one structure of ``PerReplica`` leaves.

    Leaves that are the same object on every replica (a variable, None, one Python constant) stay
    as they are, as TensorFlow's ``regroup`` does; anything else (equal values included) is a
    ``PerReplica``.
    """
    first = per_replica_outputs[0]
    if len(per_replica_outputs) == 1:
        return first
    check_same_structure(per_replica_outputs, "Replica functions")
    columns = list(zip(*(flatten(o) for o in per_replica_outputs)))
    leaves = [_regroup_leaf(column) for column in columns]
    return pack_as(first, leaves)


def _regroup_leaf(column: Sequence[Any]) -> Any:
    head = column[0]
    if all(v is head for v in column):
        return head
    return PerReplica(column)
