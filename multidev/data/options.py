"""``md.data.Options``: settings attached to a dataset with ``with_options``.

    >>> import multidev as md
    >>> options = md.data.Options()
    >>> options.experimental_distribute.auto_shard_policy = md.data.experimental.AutoShardPolicy.DATA
    >>> ds = md.data.Dataset.range(8).with_options(options)
    >>> ds.options().experimental_distribute.auto_shard_policy
    <AutoShardPolicy.DATA: 2>

Options flow downstream: a dataset's options are its inputs' options merged with its own;
where both set a field, the later ``with_options`` wins.
"""

from __future__ import annotations

import copy
import enum
from typing import Any


class AutoShardPolicy(enum.IntEnum):
    """How a multi-worker input pipeline is split between workers (TF's values)."""

    OFF = -1
    AUTO = 0
    FILE = 1
    DATA = 2
    HINT = 3


class AutotuneAlgorithm(enum.IntEnum):
    """``options.autotune.autotune_algorithm`` (TF's values; multidev has no autotuner to pick)."""

    DEFAULT = 0
    HILL_CLIMB = 1
    GRADIENT_DESCENT = 2
    MAX_PARALLELISM = 3
    STAGE_BASED = 4


class ExternalStatePolicy(enum.IntEnum):
    """``options.experimental_external_state_policy`` (TF's values: what checkpointing does with
    functions that touch external state; multidev checkpoints iterator positions only)."""

    WARN = 0
    IGNORE = 1
    FAIL = 2


class _OptionsBase:
    """Fixed set of typed fields; remembers which were set so merges keep explicit values."""

    _fields: dict[str, tuple[Any, Any]] = {}  # name -> (default, validator)

    def __init__(self) -> None:
        object.__setattr__(self, "_values", {})

    def __getattr__(self, name: str) -> Any:
        fields = type(self)._fields
        if name not in fields:
            raise AttributeError(f"{type(self).__name__} has no option {name!r}; valid options: {sorted(fields)}.")
        values = object.__getattribute__(self, "_values")
        if name not in values and isinstance(fields[name][0], type):
            values[name] = fields[name][0]()  # nested options object, created on first access
        return values.get(name, fields[name][0])

    def __setattr__(self, name: str, value: Any) -> None:
        fields = type(self)._fields
        if name not in fields:
            raise AttributeError(
                f"Cannot set the property {name!r} on {type(self).__name__}; valid options: {sorted(fields)}."
            )
        self._values[name] = fields[name][1](name, value)

    def __dir__(self) -> list:
        return sorted(set(super().__dir__()) | set(type(self)._fields))

    def merge(self, other: "_OptionsBase") -> "_OptionsBase":
        """A copy of self with every field ``other`` set explicitly taken from ``other``."""
        result = copy.deepcopy(self)
        for name, value in other._values.items():
            mine = result._values.get(name)
            if isinstance(value, _OptionsBase) and isinstance(mine, _OptionsBase):
                result._values[name] = mine.merge(value)
            else:
                result._values[name] = copy.deepcopy(value)
        return result

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and all(
            getattr(self, name) == getattr(other, name) for name in type(self)._fields
        )

    def __repr__(self) -> str:
        items = ", ".join(f"{name}={getattr(self, name)!r}" for name in type(self)._fields)
        return f"{type(self).__name__}({items})"


def _optional_bool(name: str, value: Any) -> Any:
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"Option {name} must be a bool or None, got {value!r}.")
    return value


def _optional_positive_int(name: str, value: Any) -> Any:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"Option {name} must be a positive int or None, got {value!r}.")
    return value


def _optional_of(kind: Any):
    """A validator for None or a value of ``kind`` (TF checks these options' types only)."""
    def check(name: str, value: Any) -> Any:
        if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
            names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise TypeError(f"Property {name!r} must be of type {names}, got {value!r} "
                            f"(type: {type(value).__name__}).")
        return value
    return check


def _policy(name: str, value: Any) -> AutoShardPolicy:
    if not isinstance(value, AutoShardPolicy):
        raise TypeError(
            f"Option {name} must be a md.data.experimental.AutoShardPolicy, got {value!r}; "
            f"valid: {[p.name for p in AutoShardPolicy]}."
        )
    return value


def _nested(cls: type):
    def check(name: str, value: Any) -> Any:
        if not isinstance(value, cls):
            raise TypeError(f"Option {name} must be a {cls.__name__}, got {value!r}.")
        return value

    return check


class DistributeOptions(_OptionsBase):
    """``options.experimental_distribute``: auto-sharding policy and device count."""

    _fields = {
        "auto_shard_policy": (AutoShardPolicy.AUTO, _policy),
        "num_devices": (None, _optional_positive_int),
    }


class ThreadingOptions(_OptionsBase):
    """``options.threading``: size of the pool used by parallel map (None: automatic)."""

    _fields = {
        "private_threadpool_size": (None, _optional_positive_int),
        "max_intra_op_parallelism": (None, _optional_positive_int),
    }


class OptimizationOptions(_OptionsBase):
    """``options.experimental_optimization``: TF's graph-rewrite switches.

    Accepted so TF code ports unchanged; multidev runs the pipeline as written (there is no
    graph optimizer), and these rewrites never change results in TF either.
    """

    _fields = {
        name: (None, _optional_bool)
        for name in (
            "apply_default_optimizations", "filter_fusion", "map_and_batch_fusion", "map_and_filter_fusion",
            "map_fusion", "map_parallelization", "noop_elimination", "parallel_batch", "shuffle_and_repeat_fusion",
            "filter_parallelization", "inject_prefetch", "seq_interleave_prefetch",
        )
    }


class AutotuneOptions(_OptionsBase):
    """``options.autotune``: TF's autotuner budgets. Accepted so TF code ports unchanged
    (``options.autotune.enabled = False`` is common); multidev sizes its pools without an autotuner."""

    _fields = {
        "enabled": (None, _optional_of(bool)),
        "cpu_budget": (None, _optional_of(int)),
        "ram_budget": (None, _optional_of(int)),
        "autotune_algorithm": (None, _optional_of(AutotuneAlgorithm)),
        "initial_parallelism": (None, _optional_of(int)),
        "min_parallelism": (None, _optional_of(int)),
    }


class Options(_OptionsBase):
    """Dataset options (``deterministic``, ``experimental_distribute``, ``threading``, ...)."""

    _fields = {
        "deterministic": (None, _optional_bool),
        "experimental_deterministic": (None, _optional_bool),
        "experimental_distribute": (DistributeOptions, _nested(DistributeOptions)),
        "threading": (ThreadingOptions, _nested(ThreadingOptions)),
        "experimental_threading": (ThreadingOptions, _nested(ThreadingOptions)),
        "experimental_slack": (None, _optional_bool),
        "experimental_optimization": (OptimizationOptions, _nested(OptimizationOptions)),
        "autotune": (AutotuneOptions, _nested(AutotuneOptions)),
        # accepted and kept, with no effect on multidev's pipelines (TF's checkpointing and tracing knobs)
        "experimental_external_state_policy": (None, _optional_of(ExternalStatePolicy)),
        "experimental_symbolic_checkpoint": (None, _optional_of(bool)),
        "experimental_warm_start": (None, _optional_of(bool)),
        "dataset_name": (None, _optional_of(str)),
        "framework_type": (None, _optional_of((list, tuple))),
    }

    def is_deterministic(self) -> bool:
        """Whether outputs must come in order (default True, as TF)."""
        for value in (self.deterministic, self.experimental_deterministic):
            if value is not None:
                return value
        return True


__all__ = ["AutoShardPolicy", "AutotuneAlgorithm", "AutotuneOptions", "DistributeOptions", "ExternalStatePolicy",
           "ThreadingOptions", "OptimizationOptions", "Options"]
