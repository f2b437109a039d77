"""Enums with TensorFlow's names and values: ``ReduceOp``, ``VariableAggregation``, ``VariableSynchronization``."""

from __future__ import annotations

import enum
from typing import Any


def enum_from_value(cls: type, value: Any, what: str, default: Any = None) -> Any:
    """``value`` as a member of ``cls``: the member itself, its name in any case, or None -> ``default``.

    Raises ValueError naming the received value and the valid names.
    """
    if value is None and default is not None:
        return default
    if isinstance(value, cls):
        return value
    if isinstance(value, str) and value.upper() in cls.__members__:
        return cls[value.upper()]
    raise ValueError(f"Invalid {what} {value!r}: expected one of {[m.name for m in cls]} "
                     f"(a {cls.__name__} or its name).")


class ReduceOp(enum.Enum):
    """How ``strategy.reduce`` and ``all_reduce`` combine values across replicas."""

    SUM = "SUM"
    MEAN = "MEAN"

    @classmethod
    def _missing_(cls, value):
        """``ReduceOp('MAX')``: TensorFlow's ValueError and words, with the valid names."""
        raise ValueError(f"{value!r} is not a valid ReduceOp: expected one of {[m.value for m in cls]} "
                         "(md.distribute.ReduceOp.SUM / .MEAN, or their names).")

    @classmethod
    def from_value(cls, op: "ReduceOp | str") -> "ReduceOp":
        """Accept a ``ReduceOp`` or its name ('SUM', 'MEAN', any case)."""
        if isinstance(op, cls):
            return op
        if isinstance(op, str) and op.upper() in cls.__members__:
            return cls[op.upper()]
        if isinstance(op, VariableAggregation) and op.name in cls.__members__:
            return cls[op.name]
        raise ValueError(
            f"Unsupported reduce op {op!r}: expected one of "
            f"{[m.name for m in cls]} (a ReduceOp or its name)."
        )

    @classmethod
    def from_variable_aggregation(cls, aggregation: "VariableAggregation") -> "ReduceOp":
        """The reduction a variable's aggregation performs (SUM -> SUM, MEAN -> MEAN), as TensorFlow."""
        if isinstance(aggregation, VariableAggregation) and aggregation.name in cls.__members__:
            return cls[aggregation.name]
        raise ValueError(f"Could not convert from `md.VariableAggregation` {aggregation!r} to `md.distribute.ReduceOp` "
                         f"type: only {[m.name for m in cls]} have one.")


class VariableAggregation(enum.Enum):
    """How writes to a distributed variable from several replicas are combined."""

    NONE = 0
    SUM = 1
    MEAN = 2
    ONLY_FIRST_REPLICA = 3

    @classmethod
    def from_value(cls, value: "VariableAggregation | str | None") -> "VariableAggregation":
        return enum_from_value(cls, value, "variable aggregation", default=cls.NONE)


class VariableSynchronization(enum.Enum):
    """When a distributed variable's copies are made consistent."""

    AUTO = 0
    NONE = 1
    ON_WRITE = 2
    ON_READ = 3

    @classmethod
    def from_value(cls, value: "VariableSynchronization | str | None") -> "VariableSynchronization":
        return enum_from_value(cls, value, "variable synchronization", default=cls.AUTO)


__all__ = ["ReduceOp", "VariableAggregation", "VariableSynchronization"]
