"""``ParameterServerStrategy.extended``: the cluster's tasks, variable creation and its RPC connection."""

from __future__ import annotations

import weakref
from typing import Any, Callable, Sequence, final

import torch

from multidev._core.enums import VariableAggregation, VariableSynchronization
from multidev.collectives.process_world import ProcessWorld
from multidev.devices import registry
from multidev.distribute.distribute_lib import ReplicatedExtended
from multidev.distribute.parameter_server import client as client_mod
from multidev.distribute.parameter_server import gradient_push, rpc_layer, server
from multidev.distribute.parameter_server.placement import Placer, num_shards
from multidev.distribute.parameter_server.variables import PSVariable, VariableSpec, from_spec, pull, push
from multidev.values import context
from multidev.values.variables import _as_tensor

_STOP_TIMEOUT = 5.0


@final
class ParameterServerExtended(ReplicatedExtended):
    """Device-level API of ParameterServerStrategy: tasks, placement, the connection to the cluster.

    The coordinator is one worker of its own (``num_workers`` is 1: it syncs with no one); variables
    and module parameters created in scope become ``PSVariable``s on the ps tasks."""

    def __init__(self, strategy: Any, devices: Sequence[registry.Device], world: ProcessWorld,
                 partitioner: Callable | None):
        super().__init__(strategy, devices, None)
        self._world = world
        self._partitioner = partitioner
        self._worker_members = [m for m in world.members if m.role == "worker"]
        self._ps_members = [m for m in world.members if m.role == "ps"]
        self._placer = Placer(len(self._ps_members))
        self._ps_variables: "weakref.WeakValueDictionary[int, PSVariable]" = weakref.WeakValueDictionary()
        self.client = server.ps_client_for(world)
        self.coordinator: Any = None
        self.connected = False

    # --- cluster ----------------------------------------------------------------------------------
    @property
    def num_worker_tasks(self) -> int:
        """The cluster's worker tasks (``_num_workers`` stays 1: the coordinator syncs with no one)."""
        return len(self._worker_members)

    @property
    def num_ps(self) -> int:
        return len(self._ps_members)

    @property
    def worker_names(self) -> list[str]:
        return [rpc_layer.task_name(m.role, m.index) for m in self._worker_members]

    @property
    def parameter_devices(self) -> tuple[str, ...]:
        """The ps tasks' devices, where variables live."""
        return tuple(f"/job:ps/replica:0/task:{m.index}/device:CPU:0" for m in self._ps_members)

    def describe_worker(self, index: int) -> str:
        return self._worker_members[index].describe()

    def connect(self) -> None:
        gradient_push.connect(self.client)
        rpc_layer.connect(self._world, rpc_layer.rpc_timeout())
        self.connected = True

    def shutdown(self) -> None:
        """Stop the coordinator's dispatchers, tell every server to leave, leave the RPC group.

        When every task answers, all leave together in order (TensorPipe then reports no closed
        pipes); when one is gone, each leaves alone at once rather than wait for it."""
        if not self.connected:
            return
        self.connected = False
        if self.coordinator is not None:
            self.coordinator._stop()
        names = [rpc_layer.task_name(m.role, m.index) for m in self._world.members if m.role in ("worker", "ps")]
        graceful = _all_answer(names, server.ping)
        _all_answer(names, server.stop, (graceful,))
        rpc_layer.disconnect(graceful=graceful, timeout=server.SHUTDOWN_TIMEOUT)
        gradient_push.disconnect()

    # --- variables ---------------------------------------------------------------------------------
    def create_variable(self, initial_value: Any, *, trainable: bool, name: str | None, dtype: Any,
                         synchronization: VariableSynchronization, aggregation: VariableAggregation) -> Any:
        if context.current_replica_id() is not None:
            raise ValueError("Variables cannot be created inside strategy.run; create them in strategy.scope().")
        return self._new_variable(_as_tensor(initial_value, dtype), name, trainable)

    def place_parameter(self, param: torch.Tensor) -> Any:
        """Module parameters created in scope become ps variables."""
        return self._new_variable(param.detach(), None, param.requires_grad)

    def create_variable_from_buffer(self, module: torch.nn.Module, name: str, buffer: torch.Tensor, *,
                                    synchronization: Any = None, aggregation: Any = None) -> Any:
        """Buffers (batch-norm statistics) stay local to each process."""
        return None

    def _new_variable(self, data: torch.Tensor, name: str | None, trainable: bool) -> PSVariable:
        if not self.connected:
            raise RuntimeError("ParameterServerStrategy is shut down; variables can no longer be created.")
        data = data.detach().cpu()
        shape = tuple(data.shape)
        layout = self._placer.layout(shape, num_shards(self._partitioner, shape, data.dtype))
        vid = self._placer.next_id()
        spec = VariableSpec(vid, name or f"Variable_{vid}", shape, data.dtype, bool(trainable), layout, len(layout) > 1)
        pieces = [(s.ps, (s.vid, data if s.start is None else data[s.start:s.end].clone())) for s in layout]
        self.client.create(client_mod.group_by_ps(pieces))
        var = from_spec(spec)
        with torch.no_grad():
            var.detach().copy_(data)
        var._mark_synced()
        self._ps_variables[vid] = var
        return var

    def create_metric_variable(self, value: torch.Tensor, name: str) -> PSVariable:
        """Keras metric state created in scope lives on a ps (as in TF): workers' updates add up there."""
        return self._new_variable(value, name, False)

    def variables_list(self) -> list[PSVariable]:
        return list(self._ps_variables.values())

    def push_stale(self) -> None:
        """Send local writes made on the coordinator (load_weights, assignments to .data) to the ps."""
        push([v for v in self.variables_list() if v._is_stale()])

    def pull_all(self) -> None:
        """Refresh the coordinator's copies of every variable from the ps."""
        pull(self.variables_list())

    def variable_created_in_scope(self, v: Any) -> bool:
        return isinstance(v, PSVariable) and self._ps_variables.get(v._spec.vid) is v


def _all_answer(names: list[str], fn: Callable, args: tuple = ()) -> bool:
    """Call ``fn(*args)`` on every task of ``names`` at once; True when all of them answered."""
    futures = [rpc_layer.call_async(name, fn, args, timeout=_STOP_TIMEOUT) for name in names]
    answered = True
    for future in futures:
        try:
            future.wait()
        except Exception:  # noqa: BLE001 - a dead task: it needs no stopping
            answered = False
    return answered


__all__ = ["ParameterServerExtended"]
