"""``Strategy`` and ``StrategyExtended``: the machinery every single-process strategy shares.

A strategy owns a list of replica devices. ``run`` calls the replica function once per replica,
concurrently (replica 0 in the caller's thread, the others in long-lived threads), each inside
its replica context and device scope. Collectives meet in the strategy's ``Rendezvous``; the
reduction algorithm is the strategy's ``CrossDeviceOps``.
"""

from __future__ import annotations

import contextlib
import sys
import weakref
from typing import Any, Callable, Sequence

import torch

from multidev._core.enums import ReduceOp, VariableAggregation, VariableSynchronization
from multidev._core.errors import AbortedError
from multidev.collectives import algorithms
from multidev.collectives.process_config import default_timeout_seconds
from multidev.collectives.rendezvous import Rendezvous
from multidev.devices import registry
from multidev import placement
from multidev.distribute.cross_device_ops import CrossDeviceOps, ReductionToOneDevice, _torch_devices
from multidev.distribute.replica_context import ReplicaContext
from multidev.distribute.replica_threads import ReplicaThreads
from multidev.values import context
from multidev.values.distributed import (DistributedValues, Mirrored, PerReplica, flatten, local_value, map_structure,
                                        pack_as, regroup)
from multidev.values.variables import DistributedVariable, MirroredVariable, SyncOnReadVariable, Variable, _as_tensor



def _cross_replica_only(method: str) -> RuntimeError:
    return RuntimeError(
        f"{method} must be called in cross-replica context (outside strategy.run); inside a replica "
        "function use md.distribute.get_replica_context() (all_reduce, merge_call) instead."
    )


class StrategyExtended:
    """Device-level API of a strategy (``strategy.extended``) and the implementation of ``run``."""

    #: Whether variables created in scope become distributed variables (False: plain, placed).
    _distributes_variables = True
    #: Whether every replica's copy aliases one storage (CentralStorageStrategy on one device).
    _share_storage = False
    #: This process's place among the workers reading input (multi-worker strategies override).
    _num_workers = 1
    _worker_index = 0
    #: Gradient bucket size for the all-reduce (CommunicationOptions.bytes_per_pack overrides).
    _bucket_bytes = 32 * 1024 * 1024
    #: Global id of this process's first replica (worker_index x local replicas).
    _replica_offset = 0

    def __init__(self, strategy: "Strategy", devices: Sequence[registry.Device],
                 cross_device_ops: CrossDeviceOps | None, parameter_device: registry.Device | None = None):
        self._strategy_ref = weakref.ref(strategy)
        self._devices = list(devices)
        self._torch_devices = [d.torch_device for d in self._devices]
        self._parameter_device = parameter_device or self._devices[0]
        self._cross_device_ops = cross_device_ops or ReductionToOneDevice()
        self._variables: list[weakref.ref] = []  # creation order: workers agree on it
        # One documented limit for every collective wait, in-process and across processes.
        self._rendezvous = Rendezvous(len(self._devices), default_timeout_seconds())
        self._contexts = [ReplicaContext(strategy, r) for r in range(len(self._devices))]
        self._threads: ReplicaThreads | None = None
        self._running = False
        # Replicas of one process on one CPU reduce gradient buckets cooperatively (ReplicaContext).
        self._cooperative_reduce = len({d.torch_device for d in self._devices}) == 1 and \
            self._torch_devices[0].type == "cpu" and len(self._devices) > 1
        # CPU replicas share the cores: each replica's kernels get an equal share of torch's
        # intra-op threads (a per-thread OpenMP setting) instead of all oversubscribing them.
        self._streams = [registry.stream_for(d) for d in self._devices]
        cpu_replicas = sum(1 for d in self._devices if d.torch_device.type == "cpu")
        self._intra_op_threads = max(1, torch.get_num_threads() // cpu_replicas) if cpu_replicas > 1 else None

    @property
    def _strategy(self) -> "Strategy":
        return self._strategy_ref()

    # --- public StrategyExtended API -------------------------------------------------------------
    @property
    def worker_devices(self) -> tuple[str, ...]:
        return tuple(d.name for d in self._devices)

    @property
    def parameter_devices(self) -> tuple[str, ...]:
        if self._share_storage:
            return (self._parameter_device.name,)
        return self.worker_devices

    #: TensorFlow's chief-only duties: one process writes checkpoints and summaries.
    should_checkpoint = True
    should_save_summary = True
    experimental_should_init = True

    def variable_created_in_scope(self, v: Any) -> bool:
        return isinstance(v, DistributedVariable) and v._strategy is self._strategy

    def reduce_to(self, reduce_op: ReduceOp | str, value: Any, destinations: Any, options: Any = None) -> Any:
        """Reduce a distributed value onto ``destinations`` (cross-replica context)."""
        if context.current_replica_id() is not None:
            raise _cross_replica_only("extended.reduce_to")
        return self._cross_device_ops.reduce(reduce_op, self._as_per_replica(value), destinations, options)

    def batch_reduce_to(self, reduce_op: ReduceOp | str, value_destination_pairs, options: Any = None) -> list:
        if context.current_replica_id() is not None:
            raise _cross_replica_only("extended.batch_reduce_to")
        return [self.reduce_to(reduce_op, v, d, options) for v, d in value_destination_pairs]

    def update(self, var: Any, fn: Callable, args: tuple = (), kwargs: dict | None = None, group: bool = True) -> Any:
        """Run ``fn(component, *args)`` on each replica's copy of ``var`` (cross-replica context)."""
        if context.current_replica_id() is not None:
            raise _cross_replica_only("extended.update")
        kwargs = kwargs or {}
        if not isinstance(var, DistributedVariable):
            with torch.no_grad():
                return fn(var, *args, **kwargs)
        results = []
        with torch.no_grad():
            for r, component in enumerate(var.values):
                results.append(fn(component, *local_value(tuple(args), r), **local_value(kwargs, r)))
        var._mark_synced()
        return regroup(results) if group else tuple(results)

    def colocate_vars_with(self, colocate_with_variable: Any):
        return self._strategy.scope()

    # --- variables ---------------------------------------------------------------------------
    def _variable_class(self, synchronization: VariableSynchronization) -> type:
        return SyncOnReadVariable if synchronization is VariableSynchronization.ON_READ else MirroredVariable

    def _create_variable(self, initial_value: Any, *, trainable: bool, name: str | None, dtype: Any,
                         synchronization: VariableSynchronization, aggregation: VariableAggregation) -> Any:
        if context.current_replica_id() is not None and len(self._devices) > 1:
            raise ValueError(
                "Variables cannot be created inside strategy.run (replica context) with more than one "
                "replica: create them in strategy.scope() before calling run."
            )
        data = _as_tensor(initial_value, dtype)
        if synchronization is VariableSynchronization.NONE:
            raise ValueError(
                "synchronization=NONE is not supported for variables created in a MirroredStrategy scope; "
                "use AUTO, ON_WRITE or ON_READ."
            )
        return self._wrap(data, trainable=trainable, name=name, synchronization=synchronization,
                          aggregation=aggregation)

    def _wrap(self, data: torch.Tensor, **kwargs: Any) -> DistributedVariable:
        cls = self._variable_class(kwargs["synchronization"])
        devices = [self._parameter_device.torch_device] * len(self._devices) if self._share_storage else self._torch_devices
        var = cls._create(data, devices, self._strategy, share_storage=self._share_storage, **kwargs)
        self._variables.append(weakref.ref(var))
        return var

    def _live_variables(self) -> list[DistributedVariable]:
        """This strategy's variables still alive, in creation order."""
        live = [v for v in (ref() for ref in self._variables) if v is not None]
        if len(live) < len(self._variables):
            self._variables = [weakref.ref(v) for v in live]
        return live

    def _prepare_variables(self) -> None:
        """Before replicas run: copy values written outside the update paths to every replica."""
        for var in self._live_variables():
            var._sync_if_stale()

    def _place_parameter(self, param: torch.Tensor) -> Any:
        """Non-distributing strategies move new parameters to their device; None keeps ``param``."""
        return None

    def _create_variable_from_parameter(self, module: torch.nn.Module, name: str, param: torch.Tensor) -> Any:
        return self._wrap(param.detach(), trainable=param.requires_grad, name=f"{type(module).__name__}.{name}",
                          synchronization=VariableSynchronization.ON_WRITE, aggregation=VariableAggregation.SUM)

    def _create_variable_from_buffer(self, module: torch.nn.Module, name: str, buffer: torch.Tensor) -> Any:
        aggregation = VariableAggregation.MEAN if buffer.is_floating_point() else VariableAggregation.ONLY_FIRST_REPLICA
        return self._wrap(buffer.detach(), trainable=False, name=f"{type(module).__name__}.{name}",
                          synchronization=VariableSynchronization.ON_READ, aggregation=aggregation)

    # --- run ---------------------------------------------------------------------------------
    def _call_for_each_replica(self, fn: Callable, args: tuple, kwargs: dict, step: Any = None) -> Any:
        """``fn`` once per replica; ``step`` (per-call inputs, e.g. Keras's ``StepInputs``) reaches every
        replica as ``replica_env().step``."""
        if context.current_replica_id() is not None:
            raise RuntimeError(
                "strategy.run cannot be called inside a replica function (replica context): "
                "use md.distribute.get_replica_context().merge_call() to go back to cross-replica context."
            )
        if self._running:
            raise RuntimeError("strategy.run is already running on another thread for this strategy.")
        registry.initialize()
        n = len(self._devices)
        _check_replica_counts((args, kwargs), n, "strategy.run")
        self._prepare_variables()
        modes = context.CallerModes.capture({d.type for d in self._torch_devices})
        if self._threads is not None:  # replicas left running by a failed run must not join this one
            self._threads.wait_idle()
        self._rendezvous.reset()
        tasks = [self._replica_task(r, fn, self._replica_args(args, r), self._replica_args(kwargs, r), modes, step)
                 for r in range(n)]
        self._running = True
        try:
            if n == 1:
                outcomes = [_outcome(tasks[0])]
            else:
                if self._threads is None:
                    self._threads = ReplicaThreads(n, type(self._strategy).__name__, self._rendezvous.abort,
                                                   busy_wait_s=self._rendezvous.timeout)
                outcomes = self._threads.run(tasks)
        finally:
            self._running = False
        self._raise_first_error(outcomes)
        return _regroup_results([value for _, value in outcomes])

    def _replica_args(self, structure: Any, replica_id: int) -> Any:
        device = self._torch_devices[replica_id]

        def pick(v: Any) -> Any:
            if isinstance(v, DistributedVariable):
                return v
            if isinstance(v, DistributedValues):
                v = v._local(replica_id)
            if isinstance(v, torch.Tensor) and v.device != device and not isinstance(v, Variable):
                v = v.to(device, non_blocking=True)
            return v

        return map_structure(pick, structure)

    def _replica_task(self, r: int, fn: Callable, args: tuple, kwargs: dict, modes: context.CallerModes,
                      step: Any = None) -> Callable:
        device = self._devices[r]
        rendezvous = self._rendezvous
        # Everything replica r is, for this call: one immutable value, set once when its task starts.
        env = context.ReplicaEnv(strategy=self._strategy, replica_context=self._contexts[r], replica_id=r,
                                 device=device, stream=self._streams[r], modes=modes, step=step)
        intra_op_threads = self._intra_op_threads if device.torch_device.type == "cpu" else None

        def task() -> Any:
            token = context.enter_replica_env(env)
            previous_threads = torch.get_num_threads()
            if intra_op_threads is not None:
                torch.set_num_threads(intra_op_threads)
            try:
                with placement.device_scope(device), modes.applied(device.torch_device.type), _on_stream(env.stream):
                    return fn(*args, **kwargs)
            except BaseException as exc:
                rendezvous.abort(exc)
                raise
            finally:
                if intra_op_threads is not None:
                    torch.set_num_threads(previous_threads)
                rendezvous.replica_finished(r)
                context.exit_replica_env(token)

        return task

    def _raise_first_error(self, outcomes: list) -> None:
        failures = [(r, e) for r, (ok, e) in enumerate(outcomes) if not ok]
        if not failures:
            return
        primary = [(r, e) for r, e in failures if not isinstance(e, AbortedError)] or failures
        r, error = primary[0]
        note = f"(raised in replica {r} on {self._devices[r].name})"
        if sys.version_info >= (3, 11):
            if note not in getattr(error, "__notes__", ()):
                error.add_note(note)
        raise error

    # --- collectives used by the replica context and optimizers ---------------------------------
    def _all_reduce_tensors(self, op: ReduceOp, tensors: Sequence[torch.Tensor], private: bool) -> list:
        _synchronize(tensors)
        results = self._cross_device_ops._all_reduce(op, tensors, self._torch_devices, private)
        _synchronize(results)
        return results

    def _all_gather_tensors(self, tensors: Sequence[torch.Tensor], axis: int) -> list:
        _synchronize(tensors)
        results = algorithms.all_gather(tensors, axis, self._torch_devices)
        _synchronize(results)
        return results

    # Cross-worker hooks: identities in one process; MultiWorkerMirroredStrategy overrides them.
    def _sum_across_workers(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    def _gather_across_workers(self, tensor: torch.Tensor, axis: int) -> torch.Tensor:
        return tensor

    def _broadcast_from_first_worker(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    def _gradient_overlap(self, refs: Sequence[torch.Tensor]) -> Any:
        """An object reducing gradients during backward (see ``gradient_overlap``), or None."""
        return None

    def _as_per_replica(self, value: Any) -> Any:
        if isinstance(value, DistributedVariable):
            return PerReplica(value.values) if isinstance(value, SyncOnReadVariable) else Mirrored(value.values)
        return value


def _on_stream(stream: Any) -> Any:
    return contextlib.nullcontext() if stream is None else torch.cuda.stream(stream)


def _synchronize(tensors: Sequence[torch.Tensor]) -> None:
    """Collectives combine tensors written on other replicas' streams: wait for those devices."""
    for device in {t.device for t in tensors if t.device.type == "cuda"}:
        torch.cuda.synchronize(device)


def _regroup_results(outputs: list) -> Any:
    """The replicas' results as ``regroup`` makes them, except that a distributed variable (returned
    as is, or by ``assign_add``) becomes a snapshot of each replica's value, as in TensorFlow:
    ``Mirrored`` for a MirroredVariable, ``PerReplica`` for a SyncOnReadVariable."""
    def snapshot(value: Any, replica_id: int) -> Any:
        if isinstance(value, DistributedVariable):
            with torch.no_grad():
                return value._components[replica_id].detach().clone()
        return value

    kinds = [type(v) for v in flatten(outputs[0])]
    if not any(issubclass(k, DistributedVariable) for k in kinds):
        return regroup(outputs)
    grouped = regroup([map_structure(lambda v, r=r: snapshot(v, r), o) for r, o in enumerate(outputs)])
    if len(outputs) == 1:
        return grouped
    return pack_as(grouped, [Mirrored(v.values) if isinstance(v, PerReplica) and issubclass(k, MirroredVariable) else v
                             for v, k in zip(flatten(grouped), kinds)])


def _check_replica_counts(structure: Any, n: int, where: str) -> None:
    """Every distributed value in ``structure`` has one component per local replica (no silent drops)."""
    def check(v: Any) -> Any:
        if isinstance(v, DistributedValues) and len(v.values) != n:
            raise ValueError(
                f"{where}: a {type(v).__name__} with {len(v.values)} values was given to a strategy with {n} "
                f"local replica(s); it needs exactly {n}, one per replica. Build it with "
                "strategy.experimental_distribute_values_from_function or experimental_distribute_dataset."
            )
        return v

    map_structure(check, structure)


def _outcome(task: Callable) -> tuple[bool, Any]:
    try:
        return True, task()
    except BaseException as exc:
        return False, exc
