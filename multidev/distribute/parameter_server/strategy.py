"""``md.distribute.ParameterServerStrategy``: variables on parameter servers, asynchronous workers.

The cluster (``TF_CONFIG``) has a ``chief`` (the coordinator: it runs your program), ``worker``
tasks (they run the functions the coordinator schedules) and ``ps`` tasks (they store variables
and apply updates). Created on the chief, the strategy joins the cluster; variables and module
parameters created in ``scope()`` go to the ps tasks round-robin, split into shards when a
``variable_partitioner`` asks for it. Created on a worker or ps task, it serves that task until the
coordinator shuts the cluster down, then exits the process: one script can run on every task.

Example:
    strategy = md.distribute.ParameterServerStrategy(
        md.distribute.cluster_resolver.TFConfigClusterResolver(),
        variable_partitioner=md.distribute.experimental.partitioners.MinSizePartitioner(max_shards=2))
    coordinator = md.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model = torch.nn.Linear(10, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
"""

from __future__ import annotations

import atexit
import weakref
from typing import Any

from multidev.devices import registry
from multidev.distribute.cluster_resolver.base import ClusterResolver
from multidev.distribute.cluster_resolver.world import parameter_server_world
from multidev.distribute.parameter_server.cluster import ParameterServerExtended
from multidev.distribute.parameter_server.placement import check_partitioner
from multidev.distribute.parameter_server.server import Server
from multidev.distribute.strategy import Strategy


def _check_resolver(cluster_resolver: Any) -> ClusterResolver:
    if isinstance(cluster_resolver, ClusterResolver):
        return cluster_resolver
    raise TypeError(
        f"ParameterServerStrategy needs a cluster resolver, got {cluster_resolver!r}. Pass "
        "md.distribute.cluster_resolver.TFConfigClusterResolver() (TF_CONFIG) or a SimpleClusterResolver."
    )


class ParameterServerStrategy(Strategy):
    """Asynchronous training with variables on ``ps`` tasks and work scheduled on ``worker`` tasks.

    Args:
        cluster_resolver: the cluster; it must have a ``chief``, at least one ``worker`` and one ``ps``.
        variable_partitioner: None, or a callable ``(shape, dtype) -> [num_shards, 1, ...]`` such as
            ``md.distribute.experimental.partitioners.FixedShardsPartitioner(2)``.

    Raises:
        ValueError: the cluster is malformed (checked before any connection is attempted).
        md.errors.UnavailableError: a task did not join within ``MULTIDEV_RPC_TIMEOUT`` seconds.
    """

    def __init__(self, cluster_resolver: ClusterResolver, variable_partitioner: Any = None):
        resolver = _check_resolver(cluster_resolver)
        partitioner = check_partitioner(variable_partitioner)
        world = parameter_server_world(resolver)
        role = world.me.role
        if role == "evaluator":
            raise ValueError(
                "ParameterServerStrategy is created by the chief (and serves worker/ps tasks); an 'evaluator' "
                "task evaluates checkpoints instead: use md.keras.utils.SidecarEvaluator there."
            )
        if role in ("worker", "ps"):
            Server(resolver).join()  # serves, then exits the process
        self._cluster_resolver = resolver
        extended = ParameterServerExtended(self, [registry.resolve("/device:CPU:0")], world, partitioner)
        super().__init__(extended)
        extended.connect()
        global _active
        _active = weakref.ref(self)
        atexit.register(_shutdown_at_exit, weakref.ref(extended))

    @property
    def cluster_resolver(self) -> ClusterResolver:
        return self._cluster_resolver

    def __repr__(self) -> str:
        ext = self._extended
        return f"<ParameterServerStrategy workers={ext.num_worker_tasks} ps={ext.num_ps}>"


_active: "weakref.ref[ParameterServerStrategy] | None" = None


def active_strategy() -> "ParameterServerStrategy | None":
    """The ParameterServerStrategy this process coordinates (one per process), if any."""
    strategy = _active() if _active is not None else None
    return strategy if strategy is not None and strategy.extended.connected else None


def _shutdown_at_exit(ref: "weakref.ref[ParameterServerExtended]") -> None:
    extended = ref()
    if extended is not None:
        extended.shutdown()


__all__ = ["ParameterServerStrategy", "active_strategy"]
