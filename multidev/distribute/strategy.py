"""``md.distribute.Strategy``: the user-facing API shared by every strategy."""

from __future__ import annotations

from typing import Any, Callable

import torch

from multidev._core.enums import ReduceOp
from multidev.collectives import algorithms
from multidev.distribute import front_end, live_hooks
from multidev.distribute.reduce_checks import check_reduce_arguments
from multidev.values import context
from multidev.values.distributed import DistributedValues, PerReplica, check_same_structure, flatten, pack_as
from multidev.values.variables import DistributedVariable
from multidev.distribute.replica_run import _check_replica_counts
from multidev.distribute.extended import StrategyExtended


def divide(total: torch.Tensor, n: int) -> torch.Tensor:
    """``total / n`` for a MEAN reduction (floor division for integer tensors, as TensorFlow)."""
    if total.is_floating_point() or total.is_complex():
        return total / n
    return torch.div(total, n, rounding_mode="floor")


#: TensorFlow's ``/`` on integers (``truediv``): small ints divide in float32, 32/64-bit ints in float64.
_TRUEDIV_DTYPES = {torch.uint8: torch.float32, torch.int8: torch.float32, torch.int16: torch.float32,
                   torch.uint16: torch.float32, torch.int32: torch.float64, torch.uint32: torch.float64,
                   torch.int64: torch.float64, torch.uint64: torch.float64}


def true_divide(total: torch.Tensor, n: int | torch.Tensor) -> torch.Tensor:
    """``total / n`` for ``strategy.reduce("MEAN", ...)``, as TensorFlow divides: the MEAN of int32
    replica ids 0 and 1 is 0.5 (float64), not 0 (floating dtypes keep theirs)."""
    target = _TRUEDIV_DTYPES.get(total.dtype)
    if target is None:
        return divide(total, int(n)) if total.dtype == torch.bool else total / n
    return total.to(target) / n


class ValueContext:
    """What ``experimental_distribute_values_from_function``'s function learns about its replica."""

    def __init__(self, replica_id_in_sync_group: int = 0, num_replicas_in_sync: int = 1):
        self.replica_id_in_sync_group = replica_id_in_sync_group
        self.num_replicas_in_sync = num_replicas_in_sync

    def __repr__(self) -> str:
        return (f"ValueContext(replica_id_in_sync_group={self.replica_id_in_sync_group}, "
                f"num_replicas_in_sync={self.num_replicas_in_sync})")


class _Scope:
    """``with strategy.scope():`` — re-entrant for one strategy; mixing two strategies raises."""

    def __init__(self, strategy: "Strategy"):
        self._strategy = strategy
        self._entered: list = []   # what context.push_scope returned, per (nested) entry

    def __enter__(self) -> "Strategy":
        current = context.current_scope_strategy()
        if current is not None and current is not self._strategy:
            raise RuntimeError(   # TensorFlow's type
                f"Mixing different md.distribute.Strategy objects: {self._strategy!r} is not {current!r}. "
                "Leave the other strategy's scope before entering this one."
            )
        front_end.on_scope_entry(self._strategy)
        self._entered.append(context.push_scope(self._strategy))
        return self._strategy

    def __exit__(self, *exc: Any) -> None:
        if not self._entered:
            raise RuntimeError("strategy.scope() exited without being entered.")
        context.pop_scope(self._entered[-1])   # raises, keeping the entry, if exited out of order
        self._entered.pop()


class Strategy:
    """Distributes computation over replicas; subclasses choose the devices and the variables' layout."""

    def __init__(self, extended: StrategyExtended):
        self._extended = extended
        self._hooks_lease = live_hooks.STRATEGY_HOOKS.acquire(self)   # torch hooks while this strategy lives

    @property
    def extended(self) -> StrategyExtended:
        """The device-level API (``md.distribute.StrategyExtended``)."""
        return self._extended

    @property
    def cluster_resolver(self) -> Any:
        """The cluster resolver of a multi-worker strategy; None for strategies of one process (as TF)."""
        return None

    @property
    def num_replicas_in_sync(self) -> int:
        """Replicas across all workers."""
        return self._extended.num_local_replicas * self._extended.num_workers

    def scope(self) -> _Scope:
        """Context in which variables and module parameters are created distributed."""
        return _Scope(self)

    def run(self, fn: Callable, args: tuple | list = (), kwargs: dict | None = None, options: Any = None) -> Any:
        """Call ``fn(*args, **kwargs)`` once per replica; ``PerReplica`` arguments give each replica its part.

        Returns the replicas' results, as ``PerReplica`` values where they differ.
        """
        if not callable(fn):
            raise TypeError(f"strategy.run needs a callable, got {fn!r}.")
        if not isinstance(args, (tuple, list)):
            raise TypeError(
                f"strategy.run: args must be a tuple or list, got {type(args).__name__}: {args!r}. "
                "Hint: for one argument write args=(x,)."
            )
        if kwargs is not None and not isinstance(kwargs, dict):
            raise TypeError(f"strategy.run: kwargs must be a dict, got {type(kwargs).__name__}.")
        with self.scope():
            return self._extended.call_for_each_replica(fn, args, kwargs)

    def reduce(self, reduce_op: ReduceOp | str, value: Any, axis: int | None) -> Any:
        """Reduce a per-replica ``value`` across replicas (and along ``axis`` if given) to one tensor.

        MEAN with an ``axis`` divides by the total number of elements along that axis, so uneven
        per-replica batches are averaged exactly. MEAN of integers divides as TensorFlow's ``/``
        (int32 ids 0 and 1 give 0.5 as float64). The result is a value, outside autograd, as in
        TensorFlow (a tape's gradient through it is None): ``loss.numpy()`` works and
        ``total_loss += strategy.reduce(...)`` keeps no step's graph alive.
        """
        if context.current_replica_id() is not None:
            raise RuntimeError("strategy.reduce must be called in cross-replica context (outside strategy.run).")
        op = ReduceOp.from_value(reduce_op)
        check_reduce_arguments("strategy.reduce", value, axis)
        leaves = flatten(value)
        return pack_as(value, [_value_of(self._reduce_leaf(op, leaf, axis)) for leaf in leaves])

    def _reduce_leaf(self, op: ReduceOp, value: Any, axis: int | None) -> torch.Tensor:
        parts = self._components_of(value)
        if parts is None:
            tensor = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
            if isinstance(tensor, DistributedVariable):   # a value, not the live variable (TF returns a tensor)
                tensor = tensor.read_value()
            if self._extended.num_local_replicas > 1 and op is ReduceOp.SUM:
                raise ValueError(
                    f"A non-distributed value {value!r} cannot be reduced with ReduceOp.SUM across "
                    f"{self.num_replicas_in_sync} replicas: it would be counted once per replica. Return it "
                    "from strategy.run (a PerReplica value) or reduce with 'MEAN'."
                )
            return self._reduce_plain(op, tensor, axis)
        device = self._extended.torch_devices[0] if parts[0].device.type != "cpu" else parts[0].device
        parts = [p.to(device) for p in parts]
        extended = self._extended
        if axis is None:
            total = extended.worker_collective.sum(algorithms.reduce_to_one(parts, ReduceOp.SUM, device))
            if op is ReduceOp.SUM or self.num_replicas_in_sync == 1:   # one replica: TF returns the value as is
                return total
            return true_divide(total, self.num_replicas_in_sync)
        sums = [p.sum(dim=axis) for p in parts]
        total = extended.worker_collective.sum(algorithms.reduce_to_one(sums, ReduceOp.SUM, device))
        if op is ReduceOp.MEAN:
            count = int(extended.worker_collective.sum(torch.tensor(float(sum(p.shape[axis] for p in parts)))))
            total = true_divide(total, count) if count else true_divide(total, 1) * float("nan")
        return total

    def _reduce_plain(self, op: ReduceOp, tensor: torch.Tensor, axis: int | None) -> torch.Tensor:
        """A non-distributed value counts once per worker, as in TensorFlow: with one replica per worker
        it is what ``run`` returned there; a MEAN of a value every local replica holds is its mean over
        the workers (the value itself in one process)."""
        workers = self._extended.num_workers
        local = tensor if axis is None else tensor.sum(dim=axis)
        if workers == 1:
            total = local
        else:
            total = self._extended.worker_collective.sum(local.clone())
        if op is ReduceOp.SUM:
            return total
        if axis is None:
            return total if workers == 1 else true_divide(total, workers)
        count = tensor.shape[axis]
        if workers > 1:  # workers' values may differ in length along axis
            count = int(self._extended.worker_collective.sum(torch.tensor(float(count))))
        return true_divide(total, count) if count else true_divide(total, 1) * float("nan")

    def _components_of(self, value: Any) -> list[torch.Tensor] | None:
        if isinstance(value, DistributedVariable):
            return value._reduce_parts()
        if isinstance(value, DistributedValues):
            _check_replica_counts(value, self._extended.num_local_replicas, "strategy.reduce/gather")
            return [v if isinstance(v, torch.Tensor) else torch.as_tensor(v) for v in value.values]
        return None

    def gather(self, value: Any, axis: int) -> Any:
        """Concatenate the replicas' values along ``axis`` (shapes may differ only along ``axis``); a
        value outside autograd, as ``reduce``'s."""
        if context.current_replica_id() is not None:
            raise RuntimeError("strategy.gather must be called in cross-replica context (outside strategy.run).")
        check_reduce_arguments("strategy.gather", value, axis, axis_required=True)

        def gather_leaf(leaf: Any) -> torch.Tensor:
            parts = self._components_of(leaf) or [leaf if isinstance(leaf, torch.Tensor) else torch.as_tensor(leaf)]
            shapes = [tuple(p.shape) for p in parts]
            for s in shapes:
                if len(s) == 0:
                    raise ValueError("strategy.gather needs tensors of rank >= 1, got a scalar.")
                if len(s) != len(shapes[0]) or any(a != b for i, (a, b) in enumerate(zip(s, shapes[0]))
                                                   if i != axis % len(s)):
                    raise ValueError(
                        f"strategy.gather: per-replica shapes {shapes} differ outside axis {axis}; only the "
                        "gathered axis may differ."
                    )
            return self._extended.worker_collective.gather(torch.cat([p.to(parts[0].device) for p in parts], dim=axis), axis)

        return pack_as(value, [_value_of(gather_leaf(leaf)) for leaf in flatten(value)])

    def experimental_local_results(self, value: Any) -> tuple:
        """The per-replica components of ``value`` as a tuple (a one-tuple for plain values)."""
        if isinstance(value, DistributedVariable):
            return value._local_variables()
        if isinstance(value, DistributedValues):
            return tuple(value.values)
        leaves = flatten(value)
        if any(isinstance(v, DistributedValues) for v in leaves):
            n = self.num_replicas_in_sync
            return tuple(pack_as(value, [v._local(r) if isinstance(v, DistributedValues) else v for v in leaves])
                         for r in range(n))
        return (value,)

    def experimental_distribute_dataset(self, dataset: Any, options: Any = None) -> Any:
        """Split each global batch of ``dataset`` across the replicas, in replica order.

        Example:
            >>> dist = strategy.experimental_distribute_dataset(md.data.Dataset.range(16).batch(4))
            >>> for batch in dist:
            ...     strategy.run(step, args=(batch,))
        """
        from multidev.distribute.input_lib import DistributedDataset

        return DistributedDataset(self, dataset, options)

    def distribute_datasets_from_function(self, dataset_fn: Callable, options: Any = None) -> Any:
        """Build the input with ``dataset_fn(md.distribute.InputContext)``; its batches are per replica."""
        from multidev.distribute.input_lib import DistributedDatasetsFromFunction

        return DistributedDatasetsFromFunction(self, dataset_fn, options)

    def experimental_distribute_datasets_from_function(self, dataset_fn: Callable, options: Any = None) -> Any:
        """TF's deprecated name of :meth:`distribute_datasets_from_function` (same behaviour)."""
        return self.distribute_datasets_from_function(dataset_fn, options)

    def experimental_distribute_values_from_function(self, value_fn: Callable[[ValueContext], Any]) -> Any:
        """Build a ``PerReplica`` value by calling ``value_fn(ValueContext)`` for each replica."""
        if not callable(value_fn):
            raise TypeError(f"experimental_distribute_values_from_function needs a callable value_fn taking a "
                            f"md.distribute.experimental.ValueContext, got {value_fn!r}.")
        n = self.num_replicas_in_sync
        offset = self._extended.replica_offset
        values = []
        for r, device in enumerate(self._extended.torch_devices):
            with torch.device(device):
                values.append(value_fn(ValueContext(offset + r, n)))
        if len(values) == 1:
            return values[0]
        # One PerReplica per leaf (TensorFlow's regroup with always_wrap): a tuple stays a tuple.
        check_same_structure(values, "experimental_distribute_values_from_function's value_fn")
        columns = zip(*(flatten(v) for v in values))
        return pack_as(values[0], [PerReplica(column) for column in columns])

    def __repr__(self) -> str:
        return f"<{type(self).__name__} devices={self._extended.worker_devices}>"


def _value_of(result: Any) -> Any:
    """A cross-replica result as TensorFlow returns it: a value no gradient flows through (its tape
    gives None there), so it neither fails ``.numpy()`` nor keeps the replicas' graphs alive."""
    return result.detach() if isinstance(result, torch.Tensor) else result
