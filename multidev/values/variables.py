"""``md.Variable`` and its distributed forms ``MirroredVariable`` and ``SyncOnReadVariable``.

A ``Variable`` is a ``torch.nn.Parameter`` with TensorFlow's ``assign`` API, so it works anywhere
torch expects a parameter. Under a strategy's ``scope()``, ``md.Variable(...)`` (and every module
parameter, see ``multidev.distribute.module_hooks``) becomes a ``DistributedVariable``: its own
storage is replica 0's copy and ``_components`` holds one leaf tensor per replica. Inside
``strategy.run`` a replica sees only its component; writes follow ``VariableAggregation``:

* NONE: the replica's own copy only (copies drift apart);
* SUM / MEAN: the replicas' values are reduced, then every copy is updated with the result;
* ONLY_FIRST_REPLICA: replica 0's value updates every copy.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch._C import DisableTorchFunctionSubclass

from multidev._core.enums import VariableAggregation, VariableSynchronization
from multidev.values import context
from multidev.values.distributed import AnyDistributedValue, DistributedValues, PerReplica
from multidev.values.strategy_protocol import StrategyLike

_UPDATES: dict[str, Callable[[torch.Tensor, torch.Tensor], Any]] = {
    "assign": lambda t, v: t.copy_(v),
    "assign_add": lambda t, v: t.add_(v),
    "assign_sub": lambda t, v: t.sub_(v),
}


def _as_tensor(value: Any, dtype: torch.dtype | None = None, device: torch.device | None = None) -> torch.Tensor:
    if callable(value) and not isinstance(value, torch.Tensor):
        value = value()
    if isinstance(value, torch.Tensor):
        out = value.detach()
        if dtype is not None or device is not None:
            out = out.to(dtype=dtype or out.dtype, device=device or out.device)
        return out
    if isinstance(value, DistributedValues):
        raise TypeError(
            f"Cannot create a variable from a distributed value {type(value).__name__}; "
            "pass a tensor (e.g. one of strategy.experimental_local_results(value))."
        )
    try:
        array = np.asarray(value)
    except Exception as exc:  # pragma: no cover - numpy raises many types
        raise TypeError(
            f"Cannot convert {value!r} to a tensor for a variable (ragged or non-numeric values are not "
            "supported); pass a rectangular array or a tensor."
        ) from exc
    if array.dtype == object:
        raise TypeError(f"Cannot convert {value!r} (ragged or non-numeric) to a tensor for a variable.")
    out = torch.as_tensor(array)
    if out.dtype == torch.float64 and dtype is None:
        out = out.to(torch.float32)  # TF's default float dtype
    return out.to(dtype=dtype or out.dtype, device=device)


def _default_name() -> str:
    """TensorFlow 2's eager default: every unnamed variable is ``Variable`` (``'Variable:0'``), not
    uniquified (the notebook of seed 004 prints ``'Variable:0'`` for each of its variables)."""
    return "Variable"


class Variable(torch.nn.Parameter):
    """A mutable tensor with TensorFlow's ``assign`` API (``tf.Variable``); a ``torch.nn.Parameter``.

    Example:
        >>> v = md.Variable(1.0)
        >>> v.assign_add(2.0).numpy()
        array(3., dtype=float32)
    """

    def __new__(
        cls,
        initial_value: Any = None,
        trainable: bool | None = None,
        name: str | None = None,
        dtype: torch.dtype | None = None,
        synchronization: VariableSynchronization | str | None = None,
        aggregation: VariableAggregation | str | None = None,
        shape: Any = None,
    ):
        if initial_value is None:
            raise ValueError("md.Variable needs an initial_value (a tensor, array, number or a callable returning one).")
        synchronization = VariableSynchronization.from_value(synchronization)
        aggregation = VariableAggregation.from_value(aggregation)
        if trainable is None:
            trainable = synchronization is not VariableSynchronization.ON_READ
        if cls is Variable:
            strategy = context.current_scope_strategy()
            if strategy is not None and strategy.extended.distributes_variables:
                return strategy.extended.create_variable(
                    initial_value, trainable=trainable, name=name, dtype=dtype,
                    synchronization=synchronization, aggregation=aggregation,
                )
        data = _as_tensor(initial_value, dtype)
        return cls._from_tensor(data, trainable=trainable, name=name,
                                synchronization=synchronization, aggregation=aggregation)

    def __init__(self, *args, **kwargs):  # __new__ did the work; Parameter has no __init__ of its own
        pass

    @classmethod
    def _from_tensor(cls, data: torch.Tensor, *, trainable: bool, name: str | None,
                     synchronization: VariableSynchronization, aggregation: VariableAggregation):
        requires_grad = bool(trainable) and (data.is_floating_point() or data.is_complex())
        self = torch.Tensor._make_subclass(cls, data, requires_grad)
        self._md_name = name or _default_name()
        self._md_trainable = bool(trainable)
        self.synchronization = synchronization
        self.aggregation = aggregation
        return self

    # --- TensorFlow's variable API ---------------------------------------------------------
    @property
    def name(self) -> str:
        return f"{self._md_name}:0"

    @property
    def trainable(self) -> bool:
        return self._md_trainable

    def read_value(self) -> torch.Tensor:
        """A snapshot of the value (the calling replica's copy inside ``strategy.run``)."""
        with torch.no_grad(), DisableTorchFunctionSubclass():
            return self._read().clone()

    @property
    def value(self) -> "Variable":
        """TensorFlow's ``v.value()`` (a snapshot: the variable is callable) and Keras 3's ``v.value``
        (the variable itself: a torch-style step reads ``v.value.grad``, the calling replica's) in one."""
        return self

    def __call__(self) -> torch.Tensor:
        return self.read_value()

    def numpy(self) -> np.ndarray:
        return self.read_value().cpu().numpy()

    def __float__(self) -> float:  # like tf.Variable: a value, with no autograd warning
        return float(self.read_value())

    def __int__(self) -> int:
        return int(self.read_value())

    def assign(self, value: Any, use_locking: bool | None = None, name: str | None = None, read_value: bool = True):
        """Set the value; returns the variable (TensorFlow returns the updated variable)."""
        return self._update("assign", value)

    def assign_add(self, delta: Any, use_locking: bool | None = None, name: str | None = None, read_value: bool = True):
        return self._update("assign_add", delta)

    def assign_sub(self, delta: Any, use_locking: bool | None = None, name: str | None = None, read_value: bool = True):
        return self._update("assign_sub", delta)

    # --- implementation ---------------------------------------------------------------------
    def _read(self) -> torch.Tensor:
        return self

    def _update(self, op: str, value: Any):
        with torch.no_grad(), DisableTorchFunctionSubclass():
            _UPDATES[op](self, self._coerce(value, self))
        return self

    def _coerce(self, value: Any, like: torch.Tensor) -> torch.Tensor:
        # The storage's torch device (a parameter-server variable's ``device`` is TF's name of its ps).
        tensor = _as_tensor(value, like.dtype, torch.Tensor.device.__get__(like))
        if tensor.shape != like.shape and torch.broadcast_shapes(tensor.shape, like.shape) != like.shape:
            raise ValueError(
                f"Cannot assign a value of shape {tuple(tensor.shape)} to variable {self.name!r} "
                f"of shape {tuple(like.shape)}."
            )
        return tensor

    def __repr__(self) -> str:
        with torch.no_grad(), DisableTorchFunctionSubclass():
            return _variable_repr(self.name, self._read())

    def __reduce_ex__(self, protocol):
        raise TypeError(
            "multidev variables are not picklable: save them with md.keras checkpoints "
            "(safetensors) or take .numpy() / .read_value()."
        )


def _variable_repr(name: str, tensor: torch.Tensor) -> str:
    dtype = str(tensor.dtype).replace("torch.", "")
    return f"<md.Variable {name!r} shape={tuple(tensor.shape)} dtype={dtype}, numpy={tensor.detach().cpu().numpy()!r}>"


def _substitute(value: Any, replica_id: int | None) -> Any:
    """Replace distributed variables in torch-function arguments by what ``replica_id`` should see."""
    if isinstance(value, DistributedVariable):
        return value._view_for(replica_id)
    if isinstance(value, (list, tuple)):
        return type(value)(_substitute(v, replica_id) for v in value)
    if isinstance(value, dict):
        return {k: _substitute(v, replica_id) for k, v in value.items()}
    return value


def local_view(tensor: Any) -> Any:
    """What autograd sees for ``tensor`` here: a distributed variable's component for the calling
    replica (its primary in cross-replica context); any other value unchanged."""
    if isinstance(tensor, DistributedVariable):
        return tensor._view_for(context.current_replica_id())
    return tensor


class DistributedVariable(Variable):
    """A variable with one component per replica; abstract (Mirrored or SyncOnRead)."""

    _strategy: StrategyLike   # the strategy whose scope created it
    # Whether loss.backward() reduces this variable's gradients across replicas (distribute/backward_reduce.py):
    # mirrored trainable variables, except Keras 3's (Keras's optimizer.apply sums them); set once hooked.
    _reduce_in_backward = True
    _backward_hooked = False

    @classmethod
    def _create(cls, data: torch.Tensor, devices: Sequence[torch.device], strategy: StrategyLike, *,
                trainable: bool, name: str | None, synchronization: VariableSynchronization,
                aggregation: VariableAggregation, share_storage: bool = False):
        """Make the variable with its storage on ``devices[0]`` and one component per device.

        ``share_storage`` makes every component alias the one storage (CentralStorageStrategy).
        """
        primary = data.detach().to(devices[0])
        self = cls._from_tensor(primary, trainable=trainable, name=name,
                                synchronization=synchronization, aggregation=aggregation)
        self._strategy = strategy
        with torch.no_grad(), DisableTorchFunctionSubclass():
            components = [self.detach()]
            for device in devices[1:]:
                components.append(self.detach() if share_storage else self.detach().to(device, copy=True))
            for c in components:
                c.requires_grad_(self.requires_grad)
        self._components = tuple(components)
        self._share_storage = share_storage
        self._synced_version = components[0]._version
        return self

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        whole = _WHOLE_VARIABLE.get(func) if args and isinstance(args[0], DistributedVariable) else None
        if whole is not None:   # a property of the variable, not of one replica's copy
            return whole(*args, **(kwargs or {}))
        replica_id = context.current_replica_id()
        args = _substitute(args, replica_id)
        kwargs = _substitute(kwargs, replica_id) if kwargs else {}
        with DisableTorchFunctionSubclass():
            return func(*args, **kwargs)

    @property
    def values(self) -> tuple:
        """The per-replica components, in replica order."""
        return self._components

    @property
    def distribute_strategy(self) -> StrategyLike:
        """The strategy whose scope created the variable (``tf.distribute.DistributedValues``'s)."""
        return self._strategy

    def _copy_variable(self, replica_id: int) -> Variable:
        """Replica ``replica_id``'s copy as an ``md.Variable`` sharing its storage (what
        ``extended.update`` hands its function, as TensorFlow hands it the component variable)."""
        with torch.no_grad(), DisableTorchFunctionSubclass():
            storage = self._components[replica_id].detach()
        name = self._md_name if replica_id == 0 else f"{self._md_name}/replica_{replica_id}"
        return Variable._from_tensor(storage, trainable=False, name=name, synchronization=self.synchronization,
                                     aggregation=self.aggregation)

    def _replica_result(self, replica_id: int) -> torch.Tensor:
        """What a write in replica context returns: the replica's copy, read when used (TensorFlow
        returns a per-replica value, so ``strategy.run(lambda: v.assign_add(1.))`` is a PerReplica)."""
        return self._components[replica_id].detach()

    @property
    def grad(self):
        replica_id = context.current_replica_id()
        return self._components[0 if replica_id is None else replica_id].grad

    @grad.setter
    def grad(self, value):
        replica_id = context.current_replica_id()
        if replica_id is not None:
            self._components[replica_id].grad = value
            return
        for c in self._components:
            c.grad = None if value is None else value.to(c.device, copy=c is not self._components[0])

    def _local(self, replica_id: int) -> torch.Tensor:
        return self._components[replica_id]

    def _reduce_parts(self) -> list | None:
        """What ``strategy.reduce`` combines: every replica's copy (None: reduce it as a plain tensor)."""
        return list(self._components)

    def _view_for(self, replica_id: int | None) -> torch.Tensor:
        """What an op sees: the replica's component, or in cross-replica context the primary."""
        if replica_id is None:
            return self
        return self._components[replica_id]

    def _read(self) -> torch.Tensor:
        return self._view_for(context.current_replica_id())

    def _sync_if_stale(self) -> None:
        """Copy the primary into the other components if it was written outside our update paths
        (``load_state_dict``, in-place edits in cross-replica context, initialisers)."""
        version = self._components[0]._version
        if version == self._synced_version:
            return
        if not self._share_storage:
            with torch.no_grad():
                for c in self._components[1:]:
                    c.copy_(self._components[0], non_blocking=True)
        self._synced_version = version

    def _mark_synced(self) -> None:
        self._synced_version = self._components[0]._version

    def _apply_to(self, replica_ids: Sequence[int], op: str, value: Any) -> None:
        with torch.no_grad(), DisableTorchFunctionSubclass():
            targets = [self._components[r] for r in replica_ids]
            if self._share_storage:
                targets = targets[:1]
            for target in targets:
                _UPDATES[op](target, self._coerce(value, target))
        if 0 in replica_ids:
            self._mark_synced()

    def __repr__(self) -> str:
        with torch.no_grad(), DisableTorchFunctionSubclass():
            parts = []
            for i, c in enumerate(self._components):
                name = self.name if i == 0 else f"{self._md_name}/replica_{i}:0"
                parts.append(f"  {i}: {_variable_repr(name, c)}")
        body = ",\n".join(parts)
        return f"{type(self).__name__}:{{\n{body}\n}}"

    def __deepcopy__(self, memo):
        """A new distributed variable of the same strategy holding copies of every component
        (torch modules deep-copy their layers, e.g. ``nn.TransformerEncoder``)."""
        if id(self) in memo:
            return memo[id(self)]
        self._sync_if_stale()
        with torch.no_grad(), DisableTorchFunctionSubclass():
            new = self._strategy.extended.create_distributed_variable(
                self._components[0].detach().clone(), trainable=self._md_trainable, name=self._md_name,
                synchronization=self.synchronization, aggregation=self.aggregation)
            for mine, theirs in zip(new._components, self._components):
                if mine.data_ptr() != new._components[0].data_ptr() or mine is new._components[0]:
                    mine.copy_(theirs)
        new._mark_synced()
        memo[id(self)] = new
        return new


def _requires_grad_(var: DistributedVariable, requires_grad: bool = True) -> DistributedVariable:
    """``requires_grad_`` / ``p.requires_grad = ...``: every replica's copy follows (freezing a layer
    after the scope freezes it on every replica, as on one device)."""
    with DisableTorchFunctionSubclass():
        torch.Tensor.requires_grad_(var, requires_grad)
        for c in var._components:
            c.requires_grad_(requires_grad)
    return var


def _set_data(var: DistributedVariable, value: torch.Tensor) -> None:
    """``p.data = t`` (what ``module.double()``, ``.half()``, ``.to(dtype)`` do to each parameter):
    every replica's copy takes the new value and dtype, on its own device."""
    if value is var:
        return
    with DisableTorchFunctionSubclass():
        new = value.detach()
        primary = var._components[0]
        if new.device != primary.device:
            raise ValueError(
                f"Cannot move {var.name!r} (created in {type(var._strategy).__name__}.scope()) from {primary.device} "
                f"to {new.device}: the strategy places each replica's copy on its own device. Convert dtypes "
                "freely (model.double()), but leave devices to the strategy (drop the .to(device)/.cuda() call).")
        torch.Tensor.data.__set__(var, new)
        primary.data = torch.Tensor.data.__get__(var)
        for c in var._components[1:]:
            c.data = primary.data if var._share_storage else new.to(c.device, copy=True)
    var._mark_synced()


_WHOLE_VARIABLE: dict = {
    torch.Tensor.requires_grad_: _requires_grad_,
    torch.Tensor.requires_grad.__set__: _requires_grad_,
    torch.Tensor.data.__set__: _set_data,
}


AnyDistributedValue.register(DistributedVariable)   # isinstance(v, md.distribute.DistributedValues), as TF


class MirroredVariable(DistributedVariable):
    """Copies kept equal on every replica (``synchronization=ON_WRITE``): writes are aggregated."""

    def _update(self, op: str, value: Any):
        replica_id = context.current_replica_id()
        n = len(self._components)
        if replica_id is None:
            if isinstance(value, PerReplica):
                for r, v in enumerate(value.values):
                    self._apply_to([r], op, v)
            else:
                self._apply_to(range(n), op, value)
            return self
        if self.aggregation is VariableAggregation.NONE or n == 1:
            self._apply_to([replica_id], op, value)
            return self._replica_result(replica_id)
        context.current_replica_context().merge_call(_merged_update, args=(self, op, value))
        return self._replica_result(replica_id)


def _merged_update(strategy: StrategyLike, var: MirroredVariable, op: str, value: Any) -> None:
    """Cross-replica half of an aggregated write: reduce the replicas' values, update every copy."""
    n = len(var._components)
    agg = var.aggregation
    if isinstance(value, PerReplica):
        parts = [var._coerce(v, var._components[0]) for v in value.values]
    else:
        tensor = var._coerce(value, var._components[0])
        if agg is VariableAggregation.SUM and bool(torch.any(tensor != 0)):
            raise ValueError(
                f"A non-DistributedValues value {value!r} cannot be reduced with the given reduce op "
                f"ReduceOp.SUM: every replica wrote the same object to {var.name!r} (aggregation SUM), which "
                "would count it once per replica. Write a value computed in the replica (a tensor), use "
                "aggregation MEAN or ONLY_FIRST_REPLICA, or assign in cross-replica context.")
        parts = [tensor] * n
    if agg is VariableAggregation.ONLY_FIRST_REPLICA:
        reduced = strategy.extended.worker_collective.broadcast(parts[0].clone())
    else:  # the strategy's reduce spans every worker's replicas
        reduced = strategy.reduce(agg.name, PerReplica(parts), axis=None).to(parts[0].dtype)
    var._apply_to(range(n), op, reduced)


class SyncOnReadVariable(DistributedVariable):
    """Copies updated locally by each replica and reduced when read in cross-replica context
    (``synchronization=ON_READ``), as Keras metrics and batch-norm statistics use."""

    _reduce_in_backward = False

    def _reduced(self) -> torch.Tensor:
        with torch.no_grad(), DisableTorchFunctionSubclass():
            agg = self.aggregation
            if agg is VariableAggregation.NONE:
                raise ValueError(
                    f"Could not convert from `md.VariableAggregation` {agg} to `md.distribute.ReduceOp` type: "
                    f"SyncOnReadVariable {self.name!r} (aggregation NONE) has no value outside strategy.run. Read "
                    "it inside strategy.run (each replica's own copy), read strategy.experimental_local_results(v), "
                    "or create it with aggregation SUM, MEAN or ONLY_FIRST_REPLICA.")
            if agg is VariableAggregation.ONLY_FIRST_REPLICA or self._strategy.num_replicas_in_sync == 1:
                return self._components[0]
            components = [c.detach() for c in self._components]
            return self._strategy.reduce(agg.name, PerReplica(components), axis=None).to(components[0].dtype)

    def _view_for(self, replica_id: int | None) -> torch.Tensor:
        if replica_id is None:
            return self._reduced()
        return self._components[replica_id]

    def _sync_if_stale(self) -> None:  # copies are independent by design
        self._mark_synced()

    def _update(self, op: str, value: Any):
        replica_id = context.current_replica_id()
        if replica_id is not None:
            self._apply_to([replica_id], op, value)
            return self._replica_result(replica_id)
        n = len(self._components)
        if self.aggregation is VariableAggregation.SUM and op == "assign":
            # Reading back sums the copies of every worker, so each copy holds an equal share.
            tensor = self._coerce(value, self._components[0])
            total = self._strategy.num_replicas_in_sync
            share = tensor / total if tensor.is_floating_point() else tensor // total
            self._apply_to(range(n), op, share)
            return self
        if self.aggregation is VariableAggregation.SUM and op != "assign":
            raise ValueError(
                f"SyncOnReadVariable {self.name!r} with aggregation SUM does not support {op} in "
                "cross-replica context: the delta cannot be split between replicas. Use assign(), "
                "or update it inside strategy.run."
            )
        self._apply_to(range(n), op, value)
        return self
