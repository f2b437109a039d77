"""``ReplicatedExtended``: the implementation of ``strategy.extended`` (and of ``run``) every strategy shares;
the abstract interface ``StrategyExtended`` is in extended.py.

A strategy owns a list of replica devices, one ``ReplicaGroup`` over them (replica_group.py: what
contexts and reducers know of the replicas), one ``ReplicaContext`` per replica and one
``ReplicaRunner`` (replica_run.py: ``run`` itself). This file keeps the strategy's variables
(creation, the chief's first values, catching copies up before each run) and its cross-replica
collectives (the reduction algorithm is the strategy's ``CrossDeviceOps``).
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable, Sequence

import torch

from multidev._core.enums import ReduceOp, VariableAggregation, VariableSynchronization
from multidev.collectives.rendezvous import Rendezvous
from multidev.devices import registry
from multidev.distribute.cross_device_ops import CrossDeviceOps, ReductionToOneDevice
from multidev.distribute.backward_reduce import BackwardReducer
from multidev.distribute.extended import StrategyExtended
from multidev.distribute.first_run_agreement import FirstRunAgreement
from multidev.distribute import copy_agreement, replica_hyperparameters, shared_numbers, sync_batch_norm
from multidev.distribute.gradient_buckets import DEFAULT_BUCKET_BYTES
from multidev.distribute.replica_context import ReplicaContext
from multidev.distribute.replica_group import ReplicaGroup
from multidev.distribute.replica_run import ReplicaRunner
from multidev.distribute.variable_layout import MirroredLayout, VariableLayout
from multidev.distribute.worker_collective import LocalWorkers, WorkerCollective
from multidev.values import context, cross_replica_grads
from multidev.values.distributed import Mirrored, PerReplica, local_value, map_structure, regroup
from multidev.values.variables import DistributedVariable, SyncOnReadVariable, _as_tensor

if TYPE_CHECKING:  # pragma: no cover
    from multidev.distribute.strategy import Strategy



def _cross_replica_only(method: str) -> RuntimeError:
    return RuntimeError(
        f"{method} must be called in cross-replica context (outside strategy.run); inside a replica "
        "function use md.distribute.get_replica_context() (all_reduce, merge_call) instead."
    )


_HOOKING = threading.Lock()   # hook_new_variables: replicas unfreezing variables inside a run


class ReplicatedExtended(StrategyExtended):
    """The implementation of ``strategy.extended`` (and of ``run``) every strategy shares: replica
    threads, in-process collectives and variable creation. What differs between strategies is
    injected: the variable layout, the worker collective and the gradient bucket size; the
    strategies' own classes (``MirroredExtended``, ...) are final configurations of it."""

    def __init__(self, strategy: "Strategy", devices: Sequence[registry.Device], cross_device_ops: CrossDeviceOps | None,
                 layout: VariableLayout | None = None, workers: WorkerCollective | None = None,
                 bucket_bytes: int = DEFAULT_BUCKET_BYTES):
        self._strategy_ref = weakref.ref(strategy)
        self._devices = list(devices)
        self._torch_devices = [d.torch_device for d in self._devices]
        self._layout = layout or MirroredLayout()
        self._workers = workers or LocalWorkers()
        self._cross_device_ops = cross_device_ops or ReductionToOneDevice()
        self._variables: list[weakref.ref] = []  # creation order: workers agree on it
        self._broadcast_count = 0  # variables [0, count) already hold the chief's values
        # Per-replica copies of state kept outside variables (torch optimizers' twins, optimizer_hooks):
        # each one's before_run() brings cross-replica writes to every replica before replicas start.
        self._run_preparers: "weakref.WeakSet[Any]" = weakref.WeakSet()
        # One documented limit for every collective wait, in-process and across processes.
        self._rendezvous = Rendezvous(len(self._devices), self._workers.timeout_seconds,
                                      [registry.stream_for(d) for d in self._devices])
        # Gradients reduced when loss.backward() returns (backward_reduce.py): made for the first run
        # with several replicas in sync.
        self._backward: BackwardReducer | None = None
        # Replicas of one process on one CPU reduce gradient buckets cooperatively (ReplicaContext);
        # not when collectives leave the process (local sums go through the cross-process all-reduce).
        cooperative = len({d.torch_device for d in self._devices}) == 1 and \
            self._torch_devices[0].type == "cpu" and len(self._devices) > 1 and not self._workers.spans_processes
        #: What contexts, reducers and buckets know of these replicas (replica_group.py).
        self.replica_group = ReplicaGroup(
            devices=tuple(self._torch_devices), rendezvous=self._rendezvous, cooperative_reduce=cooperative,
            shared_storage=self._layout.share_storage, bucket_bytes=bucket_bytes, overlap=_weak_overlap(self))
        self._contexts = [ReplicaContext(strategy, r, self.replica_group) for r in range(len(self._devices))]
        self._first_runs = FirstRunAgreement()   # .data writes from each replica's batch (generative models)
        self._runner = ReplicaRunner(strategy, self._devices, self.replica_group, self._contexts,
                                     self._layout.distributes, self._live_variables)
        self.should_checkpoint = self.should_save_summary = self._workers.is_chief

    @property
    def _strategy(self) -> "Strategy":
        return self._strategy_ref()

    # --- public StrategyExtended API -------------------------------------------------------------
    @property
    def worker_devices(self) -> tuple[str, ...]:
        return tuple(d.name for d in self._devices)

    @property
    def parameter_devices(self) -> tuple[str, ...]:
        return self._layout.parameter_devices(self.worker_devices)

    @property
    def local_devices(self) -> tuple[registry.Device, ...]:
        return tuple(self._devices)

    @property
    def num_local_replicas(self) -> int:   # hot: read by num_replicas_in_sync and replica ids
        return len(self._devices)

    @property
    def replica_offset(self) -> int:
        return self._workers.worker_index * len(self._devices)

    @property
    def worker_collective(self) -> WorkerCollective:
        return self._workers

    @property
    def replica_random_streams(self) -> Any:
        return self._runner.random_streams

    @property
    def distributes_variables(self) -> bool:
        return self._layout.distributes

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
        """Run ``fn(copy, *args)`` on each replica's copy of ``var`` (cross-replica context); each copy
        is an ``md.Variable`` over that replica's storage, so ``copy.assign(...)`` works, as in TF.
        Grouped results come back ``Mirrored`` (TensorFlow's ``update_regroup``)."""
        replica_context = context.current_replica_context()
        if replica_context is not None:   # TensorFlow: a merge_call, then the cross-replica update
            return replica_context.merge_call(_update_in_cross_replica, args=(var, fn, tuple(args), kwargs or {}, group))
        kwargs = kwargs or {}
        if not isinstance(var, DistributedVariable):
            with torch.no_grad():
                return fn(var, *args, **kwargs)
        results = []
        with torch.no_grad():
            for r in range(len(var.values)):
                results.append(fn(var._copy_variable(r), *local_value(tuple(args), r), **local_value(kwargs, r)))
        var._mark_synced()
        return _update_regroup(results) if group else tuple(results)

    def non_slot_devices(self, var_list: Any) -> tuple[str, ...]:
        """Where state that belongs to no variable (an optimizer's step counter) lives: every
        replica's device, as TensorFlow's MirroredStrategy answers."""
        return self.worker_devices

    def update_non_slot(self, colocate_with: Any, fn: Callable, args: tuple = (), kwargs: dict | None = None,
                        group: bool = True) -> Any:
        """Run ``fn(*args, **kwargs)`` once per device of ``colocate_with`` (cross-replica context)."""
        if context.current_replica_id() is not None:
            raise _cross_replica_only("extended.update_non_slot")
        devices = [colocate_with] if isinstance(colocate_with, str) else list(colocate_with)
        results = []
        for r, _ in enumerate(devices):
            with torch.no_grad():
                results.append(fn(*local_value(tuple(args), r), **local_value(kwargs or {}, r)))
        return _update_regroup(results) if group else tuple(results)

    def colocate_vars_with(self, colocate_with_variable: Any):
        return self._strategy.scope()

    # --- variables ---------------------------------------------------------------------------
    def create_variable(self, initial_value: Any, *, trainable: bool, name: str | None, dtype: Any,
                        synchronization: VariableSynchronization, aggregation: VariableAggregation) -> Any:
        replica_context = context.current_replica_context()
        if replica_context is not None and len(self._devices) > 1:
            # Every replica asks for it: one variable is made, once, from replica 0's initial value
            # (TensorFlow's mirrored variable creator), and every replica gets that variable.
            return replica_context.merge_call(_create_once, args=(initial_value,), kwargs=dict(
                trainable=trainable, name=name, dtype=dtype, synchronization=synchronization, aggregation=aggregation))
        data = _as_tensor(initial_value, dtype)
        if aggregation is VariableAggregation.MEAN and not data.is_floating_point():
            raise ValueError(
                f"creating distributed md.Variable with aggregation=MEAN and a non-floating dtype ({data.dtype}) "
                "is not supported, please use a different aggregation (SUM, ONLY_FIRST_REPLICA) or dtype (e.g. "
                "md.float32).")
        if synchronization is VariableSynchronization.AUTO:   # TensorFlow resolves AUTO to ON_WRITE here
            synchronization = VariableSynchronization.ON_WRITE
        if synchronization is VariableSynchronization.NONE:
            raise ValueError(
                "synchronization=NONE is not supported for variables created in a MirroredStrategy scope; "
                "use AUTO, ON_WRITE or ON_READ."
            )
        return self.create_distributed_variable(data, trainable=trainable, name=name, synchronization=synchronization,
                                                aggregation=aggregation)

    def create_distributed_variable(self, data: torch.Tensor, *, trainable: bool, name: str | None,
                                    synchronization: VariableSynchronization,
                                    aggregation: VariableAggregation) -> DistributedVariable:
        cls = self._layout.variable_class(synchronization)
        devices = self._layout.component_devices(self._devices)
        var = cls._create(data, devices, self._strategy, trainable=trainable, name=name,
                          synchronization=synchronization, aggregation=aggregation,
                          share_storage=self._layout.share_storage)
        self._variables.append(weakref.ref(var))
        return var

    def _live_variables(self) -> list[DistributedVariable]:
        """This strategy's variables still alive, in creation order. Dropping the dead ones keeps
        ``_broadcast_count`` counting the live variables broadcast already: a variable made after a
        collection must still be broadcast (workers collect garbage at different moments; a stale
        count skipped the new model's broadcast on one worker only, a collective mismatch)."""
        live, broadcast = [], 0
        for i, ref in enumerate(self._variables):
            var = ref()
            if var is not None:
                live.append(var)
                broadcast += i < self._broadcast_count
        if len(live) < len(self._variables):
            self._variables = [weakref.ref(v) for v in live]
            self._broadcast_count = broadcast
        return live

    def _prepare_variables(self) -> None:
        """Before replicas run: new variables take the chief's values (several workers), then values
        (and optimizer state) written outside the update paths are copied to every replica."""
        fresh = [v for v in (ref() for ref in self._variables[self._broadcast_count:]) if v is not None]
        if fresh:
            self._workers.broadcast_initial_values([v._components[0] for v in fresh])
        live = self._live_variables()
        self._broadcast_count = len(self._variables)
        if self._backward is None and self._strategy.num_replicas_in_sync > 1:
            self._backward = BackwardReducer(self.replica_group, self._contexts, self._runner.steps)
        for var in live:
            var._sync_if_stale()
        cross_replica_grads.fold_all(live)   # a backward outside runs: each replica's p.grad, as each rank's
        self.hook_new_variables(live)
        backward = self._backward
        if backward is not None:
            backward.before_run()
        for preparer in list(self._run_preparers):
            preparer.before_run()

    def hook_new_variables(self, live: list[DistributedVariable] | None = None) -> None:
        """Hook variables not hooked yet for reduction in backward (before a run; or inside one, in a
        merge_call, for variables a lazy module's first forward pass just made: the replicas wait; or from
        a replica unfreezing a variable, ``requires_grad_(True)``: under a lock, as every replica may)."""
        backward = self._backward
        if backward is None:
            return
        with _HOOKING:
            for var in (ref() for ref in self._variables) if live is None else live:   # no pruning: indices count
                if var is not None and not var._backward_hooked:
                    var._backward_hooked = backward.track(var)

    def add_run_preparer(self, preparer: Any) -> None:
        """Call ``preparer.before_run()`` (held weakly) before every ``strategy.run`` starts its
        replicas: state kept per replica outside variables (torch optimizers' twins) catches up with
        what was written in cross-replica context."""
        self._run_preparers.add(preparer)

    def place_value(self, value: torch.Tensor) -> bool:
        """Non-distributing strategies move new variables, parameters and buffers to their device, in place."""
        return self._layout.place_value(value)

    def create_variable_from_parameter(self, module: torch.nn.Module, name: str, param: torch.Tensor) -> Any:
        sync_batch_norm.adopt(module)   # a SyncBatchNorm synchronises over these replicas
        var = self.create_distributed_variable(
            param.detach(), trainable=param.requires_grad, name=f"{type(module).__name__}.{name}",
            synchronization=VariableSynchronization.ON_WRITE, aggregation=VariableAggregation.SUM)
        var._module_value = True   # torch.save(model) pickles it as torch's tensor (DistributedVariable.__reduce_ex__)
        return var

    def create_variable_from_buffer(self, module: torch.nn.Module, name: str, buffer: torch.Tensor, *,
                                    synchronization: VariableSynchronization | None = None,
                                    aggregation: VariableAggregation | None = None) -> Any:
        """A torch buffer (running statistics, counters) is sync-on-read: each replica updates its own
        copy, a cross-replica read takes the mean (floats) or replica 0's (integers). A Keras state
        weight passes its ``add_weight`` policy instead, checked as ``md.Variable``'s in this scope."""
        sync_batch_norm.adopt(module)
        if synchronization is None and aggregation is None:
            synchronization = VariableSynchronization.ON_READ
            aggregation = VariableAggregation.MEAN if buffer.is_floating_point() else VariableAggregation.ONLY_FIRST_REPLICA
            var = self.create_distributed_variable(
                buffer.detach(), trainable=False, name=f"{type(module).__name__}.{name}",
                synchronization=synchronization, aggregation=aggregation)
            var._module_value = True   # (as a parameter's)
            var._running_statistic = isinstance(module, torch.nn.modules.batchnorm._NormBase)
            return var
        return self.create_variable(
            buffer.detach(), trainable=False, name=f"{type(module).__name__}.{name}", dtype=None,
            synchronization=synchronization or VariableSynchronization.AUTO,
            aggregation=aggregation or VariableAggregation.NONE)

    # --- run ---------------------------------------------------------------------------------
    def _call_for_each_replica(self, fn: Callable, args: tuple, kwargs: dict, step: Any = None) -> Any:
        """``fn`` once per replica (replica_run.py); ``step`` (per-call inputs, e.g. Keras's ``StepInputs``)
        reaches every replica as ``replica_env().step``."""
        if len(self._torch_devices) > 1:
            shared_numbers.check(fn)
        calls = self._workers.calls_made
        try:
            result = self._runner.run(fn, args, kwargs, step, self._prepare_variables)
        except RuntimeError as error:
            refusal = copy_agreement.shared_copy_refusal(self._live_variables(), len(self._torch_devices), error)
            if refusal is not None:
                raise refusal from error
            raise
        if not self._runner.steps.active:   # (not a call nested in merge_call: its run checks at its end)
            every_worker = self._workers.calls_made != calls   # its collectives met: every worker ran it
            replica_hyperparameters.raise_disagreements()
            self._check_replica_writes()
            if len(self._torch_devices) > 1 or self._workers.num_workers > 1:
                self._first_runs.check(fn, self._live_variables(), self._workers, every_worker)
        return result

    def _check_replica_writes(self) -> None:
        """After the replicas ran: copies written there outside the update paths must agree
        (``DistributedVariable._check_replica_writes``): those whose replica 0 copy changed, and
        those given an unreduced ``torch.autograd.grad`` gradient that no in-place op updated (a
        write through ``p.data`` leaves the version counter alone). With several workers every
        worker's copies are compared (``copy_agreement``); one replica in one process has one copy."""
        several_workers = self._workers.num_workers > 1
        if len(self._torch_devices) < 2 and not several_workers:
            return
        written = [v for v in self._live_variables() if v._components[0]._version != v._synced_version
                   or v._data_set_in_run]
        computed = self._backward.take_computed() if self._backward is not None else []
        data_set = [v for v in written if v._data_set_in_run]
        for var in data_set:
            var._data_set_in_run = False
        if several_workers:
            copy_agreement.check_across_workers(self._workers, written, computed + data_set)
            return
        for var in written:
            var._check_replica_writes()
        for var in computed + data_set:
            var._check_replica_writes(unversioned=True)

    # --- collectives used by the replica context and optimizers ---------------------------------
    def all_reduce_tensors(self, op: ReduceOp, tensors: Sequence[torch.Tensor], private: bool) -> list:
        return self._workers.all_reduce(op, tensors, self._torch_devices, private, self._cross_device_ops)

    def all_gather_tensors(self, tensors: Sequence[torch.Tensor], axis: int) -> list:
        return self._workers.all_gather(tensors, axis, self._torch_devices)

    def _gradient_overlap(self, refs: Sequence[torch.Tensor]) -> Any:
        """An object reducing gradients during backward (see ``gradient_overlap``), or None."""
        return None

    def _as_per_replica(self, value: Any) -> Any:
        if isinstance(value, DistributedVariable):
            return PerReplica(value.values) if isinstance(value, SyncOnReadVariable) else Mirrored(value.values)
        return value


def _weak_overlap(extended: ReplicatedExtended) -> Callable[[Sequence[torch.Tensor]], Any]:
    """``extended._gradient_overlap`` through a weak reference (the group must not keep its strategy's
    extended alive: a strategy that is garbage takes its replica threads along)."""
    method = weakref.WeakMethod(extended._gradient_overlap)

    def overlap(refs: Sequence[torch.Tensor]) -> Any:
        bound = method()
        return None if bound is None else bound(refs)

    return overlap


def _update_in_cross_replica(strategy: "Strategy", var: Any, fn: Callable, args: tuple, kwargs: dict,
                             group: bool) -> Any:
    """merge_call half of ``extended.update`` in replica context: replica 0's function (each replica
    may have made its own, e.g. a lambda) updates every copy with each replica's arguments."""
    var, fn, group = local_value((var, fn, group), 0)
    return strategy.extended.update(var, fn, args, kwargs, group)


def _create_once(strategy: "Strategy", initial_value: Any, **kwargs: Any) -> DistributedVariable:
    """merge_call half of a variable created in replica context: replica 0's arguments make it."""
    initial_value, kwargs = local_value((initial_value, kwargs), 0)
    return strategy.extended.create_variable(initial_value, **kwargs)


def _update_regroup(results: list) -> Any:
    """``extended.update``'s results: one value if every copy gave the same object, else ``Mirrored``."""
    grouped = regroup(results)
    return map_structure(lambda v: Mirrored(v.values) if isinstance(v, PerReplica) else v, grouped)
