"""``md.distribute.Server``: what a ``worker`` or ``ps`` task runs (TensorFlow's ``tf.distribute.Server``).

A server joins the cluster's RPC group and serves the coordinator's and workers' requests until
the coordinator shuts the cluster down; then ``join()`` exits the process with status 0, so a
script shared by every task never runs the coordinator's code on a worker. If the coordinator
disappears without shutting down, the server notices within seconds (three missed liveness
probes, each bounded) and exits with an error naming it.

Example:
    resolver = md.distribute.cluster_resolver.TFConfigClusterResolver()
    if resolver.task_type in ("worker", "ps"):
        md.distribute.Server(resolver).join()     # never returns
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from multidev._core.errors import UnavailableError
from multidev.distribute.cluster_resolver import SimpleClusterResolver
from multidev.distribute.cluster_resolver.base import ClusterResolver
from multidev.distribute.cluster_resolver.world import parameter_server_world
from multidev.distribute.cluster_spec import ClusterSpec
from multidev.distribute.parameter_server import client as client_mod
from multidev.distribute.parameter_server import gradient_push, rpc_layer, worker_service

LIVENESS_INTERVAL = 2.0
LIVENESS_TIMEOUT = 10.0
LIVENESS_FAILURES = 3
SHUTDOWN_TIMEOUT = 10.0   # an orderly exit waits this long for the other tasks at most
_stop_event = threading.Event()
_orderly_exit = [False]


def stop(graceful: bool = False) -> None:
    """RPC from the coordinator: the cluster is done; servers leave (``graceful``: every task is alive,
    so all leave the RPC group together, in order)."""
    _orderly_exit[0] = bool(graceful)
    _stop_event.set()


def ping() -> bool:
    """RPC liveness probe."""
    return True


def _resolver(cluster: Any, job_name: str | None, task_index: int | None) -> ClusterResolver:
    if isinstance(cluster, ClusterResolver):
        return cluster
    if isinstance(cluster, (ClusterSpec, dict)):
        return SimpleClusterResolver(ClusterSpec(cluster), task_type=job_name, task_id=task_index)
    raise TypeError(
        f"md.distribute.Server needs a ClusterResolver or a ClusterSpec (with job_name and task_index); "
        f"got {cluster!r}."
    )


def ps_client_for(world: Any) -> client_mod.PSClient:
    """The client of the ps tasks of ``world``."""
    ps = [m for m in world.members if m.role == "ps"]
    return client_mod.PSClient([rpc_layer.task_name(m.role, m.index) for m in ps], [m.address for m in ps])


_process_task: list = []   # the (role, index) this process serves, once a Server was made


def _refuse_in_process_cluster(role: str, index: int) -> None:
    """One task per process: refuse, before connecting, a Server for another task than this process's
    (TF_CONFIG's task, or a Server made before): TensorFlow's notebooks start every worker and ps
    ``tf.distribute.Server`` inside the coordinator's process, which would wait for a rendezvous that
    this process itself should have served."""
    import json
    import os
    try:
        env_task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task") or {}
    except ValueError:
        env_task = {}
    here = tuple(_process_task) or ((env_task.get("type"), int(env_task.get("index", 0))) if env_task.get("type")
                                    else None)
    if here is not None and here != (role, index):
        raise ValueError(
            f"md.distribute.Server for {role} {index} in a process that is {here[0]} {here[1]}: multidev runs one "
            "task per process (torch.distributed.rpc), so TensorFlow's in-process cluster (every worker and ps "
            "Server started in the coordinator's process) cannot run. Start each task in its own process with "
            "its own TF_CONFIG (`multidev launch --chief --workers N --ps P script.py`); there worker and ps "
            "tasks run md.distribute.Server(resolver).join().")
    _process_task[:] = [role, index]


class Server:
    """A ``worker`` or ``ps`` task of a parameter-server cluster.

    Args:
        server_or_cluster_def: a ClusterResolver, or a ClusterSpec / dict with ``job_name`` and ``task_index``.
        job_name, task_index: this task (when a ClusterSpec is given).
        protocol: accepted for compatibility ("grpc"); the transport is torch.distributed.rpc.
        start: start at once (join the cluster's RPC group).

    Raises:
        ValueError: the cluster or the task is malformed (before any connection).
    """

    def __init__(self, server_or_cluster_def: Any, job_name: str | None = None, task_index: int | None = None,
                 protocol: str | None = None, config: Any = None, start: bool = True):
        self._resolver = _resolver(server_or_cluster_def, job_name, task_index)
        self._world = parameter_server_world(self._resolver)
        role = self._world.me.role
        if role not in ("worker", "ps"):
            raise ValueError(
                f"md.distribute.Server runs 'worker' and 'ps' tasks; this task is {role!r}. The chief creates "
                "ParameterServerStrategy and a ClusterCoordinator instead."
            )
        _refuse_in_process_cluster(role, self._world.me.index)
        self._started = False
        if start:
            self.start()

    @property
    def target(self) -> str:
        """This task's address (``host:port`` of TF_CONFIG)."""
        return self._world.me.address or ""

    def start(self) -> None:
        """Join the cluster's RPC group (blocks until every task joined, bounded by the RPC timeout)."""
        if self._started:
            return
        import torch._dynamo  # noqa: F401 - torch.optim imports it on the first step: pay it at start-up
        world = self._world
        if world.me.role == "worker":
            workers = [m for m in world.members if m.role == "worker"]
            worker_service.configure(world.me.index, len(workers))
        gradient_push.connect(ps_client_for(world))
        rpc_layer.connect(world, rpc_layer.rpc_timeout())
        self._started = True

    def join(self) -> None:
        """Serve until the coordinator shuts the cluster down, then exit the process (status 0)."""
        self.start()
        chief = rpc_layer.task_name("chief", 0)
        failures = 0
        while not _stop_event.wait(LIVENESS_INTERVAL):
            try:
                rpc_layer.call(chief, ping, timeout=LIVENESS_TIMEOUT)
                failures = 0
            except UnavailableError as err:
                failures += 1
                if _stop_event.is_set():
                    break
                if failures < LIVENESS_FAILURES:  # a loaded machine may miss one probe
                    continue
                rpc_layer.disconnect()
                print(f"multidev: {self._world.me.describe()} lost the coordinator ({err}); exiting.",
                      file=sys.stderr, flush=True)
                raise SystemExit(1) from None
            except Exception:  # noqa: BLE001 - the coordinator is shutting down
                pass
        rpc_layer.disconnect(graceful=_orderly_exit[0], timeout=SHUTDOWN_TIMEOUT)
        gradient_push.disconnect()
        raise SystemExit(0)


__all__ = ["Server", "stop", "ping", "ps_client_for"]
