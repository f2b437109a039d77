"""Variables stored on parameter servers: ``PSVariable`` and ``ShardedVariable``.

The values live on ``ps`` tasks. Each process (coordinator, worker) holds a local copy in the
variable's own storage, so torch ops and modules use it like any parameter: a worker refreshes
the copies a scheduled function uses before running it; the coordinator refreshes them on
``read_value()``/``numpy()`` and after ``ClusterCoordinator.join()``. Writes (``assign*``) go to
the parameter servers. A ``ShardedVariable`` is split along axis 0 into shards on different ps
tasks and behaves as one variable (an embedding lookup sees the whole table); its shards are
``.variables`` (what a Keras layer's ``.weights`` lists, each with its ps ``.device`` as in TF).

Writes made in place inside a scheduled function to a non-trainable variable (Keras metric state:
``total.add_(...)``) are sent to the ps as increments after the function (``push_increments``), so
the coordinator reads the sum over all workers, as TensorFlow's metric variables on ps do.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch._C import DisableTorchFunctionSubclass

from multidev._core.enums import VariableAggregation, VariableSynchronization
from multidev.distribute.parameter_server import client as client_mod
from multidev.values.variables import Variable


@dataclasses.dataclass(frozen=True)
class Shard:
    """One stored piece of a variable: on task ``ps`` with id ``vid``, rows ``start:end`` (None: all)."""

    ps: int
    vid: int
    start: int | None = None
    end: int | None = None


@dataclasses.dataclass(frozen=True)
class VariableSpec:
    """What a process needs to rebuild its local copy of a ps variable (sent to workers)."""

    vid: int
    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    trainable: bool
    layout: tuple[Shard, ...]
    sharded: bool


class PSVariable(Variable):
    """A variable whose value lives on a parameter server (``tf.Variable`` placed on ``/job:ps``).

    Example:
        >>> with strategy.scope():
        ...     v = md.Variable(1.0)      # a PSVariable on ps:0
        >>> v.assign_add(2.0).numpy()
        array(3., dtype=float32)
    """

    @classmethod
    def _from_spec(cls, spec: VariableSpec, data: torch.Tensor | None = None) -> "PSVariable":
        data = torch.zeros(spec.shape, dtype=spec.dtype) if data is None else data
        self = cls._from_tensor(data, trainable=spec.trainable, name=spec.name,
                                synchronization=VariableSynchronization.ON_WRITE,
                                aggregation=VariableAggregation.NONE)
        self._spec = spec
        self._mark_synced()
        return self

    # --- layout ------------------------------------------------------------------------------
    @property
    def ps_tasks(self) -> tuple[int, ...]:
        """Indices of the ps tasks holding this variable (one per shard)."""
        return tuple(s.ps for s in self._spec.layout)

    def _pieces(self) -> list[tuple[Shard, torch.Tensor]]:
        """Each shard with the part of the local copy it covers (a view)."""
        with DisableTorchFunctionSubclass():
            whole = self.detach()
            return [(s, whole if s.start is None else whole[s.start:s.end]) for s in self._spec.layout]

    def _mark_synced(self) -> None:
        self._synced_version = self._version

    def _is_stale(self) -> bool:
        """True when the local copy was written here (load_weights, in-place edits) and not pushed."""
        return self._version != self._synced_version

    # --- TensorFlow's variable API ---------------------------------------------------------------
    def read_value(self) -> torch.Tensor:
        """The current value, fetched from the parameter servers."""
        pull([self])
        return super().read_value()

    def _update(self, op: str, value: Any):
        tensor = self._coerce(value, self)
        client = client_mod.current_client()
        pieces = [(s.ps, (s.vid, tensor if s.start is None or tensor.dim() == 0 else tensor[s.start:s.end]))
                  for s, _ in self._pieces()]
        client.update(op, client_mod.group_by_ps(pieces))
        pull([self])
        return self

    def __repr__(self) -> str:
        with torch.no_grad(), DisableTorchFunctionSubclass():
            ps = ", ".join(f"ps:{p}" for p in self.ps_tasks)
            return (f"<{type(self).__name__} {self.name!r} shape={tuple(self.shape)} "
                    f"dtype={str(self.dtype).replace('torch.', '')} on {ps}>")

    def __deepcopy__(self, memo):
        raise TypeError(
            f"Cannot deepcopy {type(self).__name__} {self.name!r}: its value lives on parameter servers. "
            "Copy its value with .read_value()."
        )


def ps_device(ps: int) -> str:
    """TensorFlow's device string of ps task ``ps``."""
    return f"/job:ps/replica:0/task:{ps}/device:CPU:0"


class ShardVariable(PSVariable):
    """One shard of a ``ShardedVariable`` as listed by ``.variables`` (a view of the whole local copy).

    ``device`` is TensorFlow's device string of the ps holding it (``/job:ps/replica:0/task:1/...``),
    not a torch device: shards are for listing, saving and assigning; the model computes with the
    whole ``ShardedVariable``.
    """

    @property
    def device(self) -> str:  # type: ignore[override]
        return ps_device(self._spec.layout[0].ps)


class ShardedVariable(PSVariable):
    """A variable split along axis 0 into shards on several parameter servers.

    It behaves as one variable to the model (``F.embedding`` on it looks rows up across all shards);
    ``.variables`` lists the shards, each a ``ShardVariable`` with its ps ``device``.

    Example:
        >>> strategy = ParameterServerStrategy(resolver, FixedShardsPartitioner(2))
        >>> with strategy.scope():
        ...     table = md.Variable(torch.zeros(10, 4))
        >>> [tuple(v.shape) for v in table.variables]
        [(5, 4), (5, 4)]
    """

    _lists_shards = True   # Keras layers list .variables in .weights, as TF does

    @property
    def variables(self) -> list[PSVariable]:
        """The shards, in row order (views of this variable's local copy)."""
        shards = getattr(self, "_shard_views", None)
        if shards is None:
            shards = []
            for i, (shard, view) in enumerate(self._pieces()):
                spec = VariableSpec(shard.vid, f"{self._md_name}/part_{i}", tuple(view.shape), self._spec.dtype,
                                    self._spec.trainable, (Shard(shard.ps, shard.vid),), False)
                shards.append(ShardVariable._from_spec(spec, view))
            self._shard_views = shards
        return shards


def pull(variables: list[PSVariable]) -> None:
    """Refresh the local copies of ``variables`` from the parameter servers (one RPC per ps)."""
    if not variables:
        return
    requests = [(s.ps, (s.vid, view)) for v in variables for s, view in v._pieces()]
    grouped = client_mod.group_by_ps(requests)
    values = client_mod.current_client().read({ps: [vid for vid, _ in items] for ps, items in grouped.items()})
    with torch.no_grad():
        for ps, items in grouped.items():
            for (_, view), value in zip(items, values[ps]):
                view.copy_(value)
    for v in variables:
        v._mark_synced()


def push(variables: list[PSVariable]) -> None:
    """Write the local copies of ``variables`` to the parameter servers (after local writes)."""
    if not variables:
        return
    items = [(s.ps, (s.vid, view.clone())) for v in variables for s, view in v._pieces()]
    client_mod.current_client().update("assign", client_mod.group_by_ps(items))
    for v in variables:
        v._mark_synced()


def snapshot_increments(variables: list[PSVariable]) -> list[tuple[PSVariable, torch.Tensor]]:
    """Copies of the non-trainable ``variables`` (metric state) before a scheduled function runs."""
    with torch.no_grad(), DisableTorchFunctionSubclass():
        return [(v, v.detach().clone()) for v in variables if not v._spec.trainable]


def push_increments(snapshots: list[tuple[PSVariable, torch.Tensor]]) -> None:
    """Send what a function added in place to each snapshotted variable as ``assign_add`` (one RPC per ps).

    Increments from several workers add up on the ps, as TensorFlow's ``assign_add`` on a metric
    variable placed there does.
    """
    items = []
    with torch.no_grad(), DisableTorchFunctionSubclass():
        for v, before in snapshots:
            if not v._is_stale():
                continue
            delta = v.detach() - before
            items += [(s.ps, (s.vid, delta if s.start is None else delta[s.start:s.end])) for s in v._spec.layout]
    if items:
        client_mod.current_client().update("assign_add", client_mod.group_by_ps(items))
    for v, _ in snapshots:
        v._mark_synced()


def spec_of(variable: PSVariable) -> VariableSpec:
    return variable._spec


def from_spec(spec: VariableSpec) -> PSVariable:
    """A fresh local copy (zeros until pulled) of the variable ``spec`` describes."""
    cls = ShardedVariable if spec.sharded else PSVariable
    return cls._from_spec(spec)


__all__ = ["Shard", "VariableSpec", "PSVariable", "ShardVariable", "ShardedVariable", "ps_device", "pull", "push",
           "snapshot_increments", "push_increments", "spec_of", "from_spec"]
