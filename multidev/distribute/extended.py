"""``md.distribute.StrategyExtended``: the abstract, typed device-level API of a strategy (``strategy.extended``).

TensorFlow's public ``StrategyExtended`` members (``worker_devices``, ``parameter_devices``,
``should_checkpoint``, ``reduce_to``, ``update``, ...) plus the multidev surface other layers use
(Keras, checkpoints, integrations): the job's layout (``num_workers``, ``worker_index``,
``replica_offset``, ``local_devices``), variable creation and collectives. Every strategy's
``extended`` is a final implementation of it; it satisfies ``values.strategy_protocol.VariableOwner``.

    >>> ext = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]).extended
    >>> isinstance(ext, md.distribute.StrategyExtended), ext.num_local_replicas, ext.num_workers
    (True, 2, 1)
"""

from __future__ import annotations

import abc
from typing import Any, Callable, Sequence

import torch

from multidev._core.enums import ReduceOp, VariableAggregation, VariableSynchronization
from multidev.devices import registry
from multidev.distribute.worker_collective import WorkerCollective


class StrategyExtended(abc.ABC):
    """Device-level API of a strategy (TensorFlow's ``tf.distribute.StrategyExtended``)."""

    #: TensorFlow's chief-only duties: whether this process writes checkpoints and summaries
    #: (instance attributes: False on the non-chief workers of a multi-worker strategy).
    should_checkpoint: bool = True
    should_save_summary: bool = True
    #: Whether this process initialises variables (every worker does, as in TensorFlow's MWMS).
    experimental_should_init: bool = True

    # --- TensorFlow's public API ---------------------------------------------------------------
    @property
    @abc.abstractmethod
    def worker_devices(self) -> tuple[str, ...]:
        """This process's replica devices, in replica order."""

    @property
    @abc.abstractmethod
    def parameter_devices(self) -> tuple[str, ...]:
        """Where variables live."""

    @abc.abstractmethod
    def variable_created_in_scope(self, v: Any) -> bool:
        """Whether ``v`` was created in this strategy's scope."""

    @abc.abstractmethod
    def reduce_to(self, reduce_op: ReduceOp | str, value: Any, destinations: Any, options: Any = None) -> Any:
        """Reduce a distributed value onto ``destinations`` (cross-replica context)."""

    @abc.abstractmethod
    def batch_reduce_to(self, reduce_op: ReduceOp | str, value_destination_pairs: Any, options: Any = None) -> list:
        """``reduce_to`` for each ``(value, destinations)`` pair."""

    @abc.abstractmethod
    def update(self, var: Any, fn: Callable, args: tuple = (), kwargs: dict | None = None, group: bool = True) -> Any:
        """Run ``fn(component, *args)`` on each replica's copy of ``var`` (cross-replica context)."""

    @abc.abstractmethod
    def colocate_vars_with(self, colocate_with_variable: Any) -> Any:
        """A scope placing new variables with ``colocate_with_variable``."""

    def call_for_each_replica(self, fn: Callable, args: tuple = (), kwargs: dict | None = None,
                              step: Any = None) -> Any:
        """Run ``fn`` once per replica, as ``strategy.run`` does (TensorFlow 1's public name).

        ``step`` is handed to every replica unchanged as ``replica_env().step``: the per-call inputs
        of a Keras step (``keras.step_inputs.StepInputs``), never a mutated attribute.
        """
        return self._call_for_each_replica(fn, tuple(args), dict(kwargs or {}), step=step)

    @abc.abstractmethod
    def _call_for_each_replica(self, fn: Callable, args: tuple, kwargs: dict, step: Any = None) -> Any:
        """The implementation of ``run`` and ``call_for_each_replica``."""

    # --- the job's layout ----------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def local_devices(self) -> tuple[registry.Device, ...]:
        """This process's replica devices (registry devices), in replica order."""

    @property
    def torch_devices(self) -> tuple[torch.device, ...]:
        """The torch device of each local replica."""
        return tuple(d.torch_device for d in self.local_devices)

    @property
    def num_local_replicas(self) -> int:
        """Replicas run by this process (``num_replicas_in_sync`` counts every worker's)."""
        return len(self.local_devices)

    @property
    @abc.abstractmethod
    def worker_collective(self) -> WorkerCollective:
        """Collectives across worker processes (identities with one process)."""

    @property
    def num_workers(self) -> int:
        """Worker processes running replicas in lockstep (1 without a multi-worker strategy)."""
        return self.worker_collective.num_workers

    @property
    def worker_index(self) -> int:
        """This process's index among the workers (0: the chief)."""
        return self.worker_collective.worker_index

    @property
    def replica_offset(self) -> int:
        """Global id (``replica_id_in_sync_group``) of this process's first replica."""
        return self.worker_index * self.num_local_replicas

    @property
    def replica_random_streams(self) -> Any:
        """The local replicas' own random streams (``placement.replica_random.ReplicaStreams``), or None."""
        return None

    # --- variables -----------------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def distributes_variables(self) -> bool:
        """Whether ``md.Variable(...)`` and module parameters in scope become distributed variables."""

    @abc.abstractmethod
    def create_variable(self, initial_value: Any, *, trainable: bool, name: str | None, dtype: torch.dtype | None,
                        synchronization: VariableSynchronization, aggregation: VariableAggregation) -> Any:
        """The variable ``md.Variable(initial_value, ...)`` makes in this strategy's scope (checked)."""

    @abc.abstractmethod
    def create_distributed_variable(self, data: torch.Tensor, *, trainable: bool, name: str | None,
                                    synchronization: VariableSynchronization, aggregation: VariableAggregation) -> Any:
        """A distributed variable of this strategy with ``data`` on every replica (no context checks)."""

    def place_parameter(self, param: torch.Tensor) -> Any:
        """A replacement for a parameter registered by a module in this strategy's scope (None: keep ``param``);
        ParameterServerStrategy makes it a variable on the parameter servers."""
        return None

    def place_value(self, value: torch.Tensor) -> bool:
        """Move a variable's tensor, or a parameter or buffer registered by a module in this strategy's scope, where
        the strategy keeps it, in place (OneDeviceStrategy); whether it moved. Distributing strategies make
        variables instead."""
        return False

    def create_variable_from_parameter(self, module: torch.nn.Module, name: str, param: torch.Tensor) -> Any:
        """The distributed variable replacing ``module``'s new parameter ``name`` (module_hooks)."""
        raise NotImplementedError(f"{type(self).__name__} does not distribute module parameters.")

    def create_variable_from_buffer(self, module: torch.nn.Module, name: str, buffer: torch.Tensor, *,
                                    synchronization: VariableSynchronization | None = None,
                                    aggregation: VariableAggregation | None = None) -> Any:
        """The distributed variable replacing ``module``'s new buffer ``name`` (module_hooks), or None to
        keep the buffer; ``synchronization``/``aggregation`` (a Keras state weight's ``add_weight``
        arguments) replace the torch-buffer defaults."""
        raise NotImplementedError(f"{type(self).__name__} does not distribute module buffers.")

    def hook_new_variables(self) -> None:
        """Variables made from a module's parameters during ``strategy.run`` (a lazy module's first forward
        pass, in a merge_call) join the gradient reduction of this very run (strategies that run replicas)."""

    def add_run_preparer(self, preparer: Any) -> None:
        """Call ``preparer.before_run()`` before every ``strategy.run`` (strategies that run replicas)."""

    def create_metric_variable(self, value: torch.Tensor, name: str) -> torch.Tensor:
        """Where a Keras metric created in scope keeps its state ``value``: here ``value`` itself
        (ParameterServerStrategy: a variable on a ps task)."""
        return value

    # --- collectives over this process's replicas (cross-replica context) --------------------
    @abc.abstractmethod
    def all_reduce_tensors(self, op: ReduceOp, tensors: Sequence[torch.Tensor], private: bool) -> list:
        """Reduce one tensor per local replica over every replica of the job; one result per local
        replica (``private``: results do not alias each other)."""

    @abc.abstractmethod
    def all_gather_tensors(self, tensors: Sequence[torch.Tensor], axis: int) -> list:
        """Concatenate every replica's tensor along ``axis``; one result per local replica."""


__all__ = ["StrategyExtended"]
