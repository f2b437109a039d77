"""``md.distribute.coordinator.ClusterCoordinator``: schedule functions on workers, asynchronously.

``schedule(fn)`` queues ``fn`` and returns a ``RemoteValue`` at once; whichever worker is free runs
it: it refreshes the variables ``fn`` uses from the parameter servers, runs it, and optimizer
steps inside it push gradients to the parameter servers, which apply them without waiting for
other workers. A worker that dies has its function run again on another worker. ``join()`` waits
for everything and re-raises the first error; afterwards the coordinator's copies of the variables
hold the current values.

Example:
    coordinator = md.distribute.coordinator.ClusterCoordinator(strategy)
    per_worker_iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))
    for _ in range(steps):
        loss = coordinator.schedule(train_step, args=(per_worker_iterator,))
    coordinator.join()
    print(loss.fetch())
"""

from __future__ import annotations

import itertools
from typing import Any, Callable

from multidev.distribute.coordinator.closure_queue import Closure, ClosureQueue
from multidev.distribute.coordinator.dispatcher import WorkerDispatcher
from multidev.distribute.coordinator.per_worker import PerWorkerDataset, new_id
from multidev.distribute.coordinator.remote_value import RemoteValue
from multidev.distribute.parameter_server import pickling, rpc_layer, worker_service
from multidev.distribute.parameter_server.strategy import ParameterServerStrategy

_function_keys = itertools.count(1)


class ClusterCoordinator:
    """Schedules functions on the workers of a ``ParameterServerStrategy`` (one per strategy).

    Raises:
        ValueError: ``strategy`` is not a ParameterServerStrategy.
    """

    def __new__(cls, strategy: Any):
        if not isinstance(strategy, ParameterServerStrategy):
            raise ValueError(
                f"ClusterCoordinator needs a ParameterServerStrategy; got {strategy!r}. Create "
                "md.distribute.ParameterServerStrategy(cluster_resolver) on the chief first."
            )
        existing = strategy.extended.coordinator
        if existing is not None:
            return existing  # TensorFlow: one coordinator per strategy
        self = super().__new__(cls)
        self._init(strategy)
        strategy.extended.coordinator = self
        return self

    def _init(self, strategy: ParameterServerStrategy) -> None:
        self._strategy = strategy
        extended = strategy.extended
        self._queue = ClosureQueue(extended.num_worker_tasks)
        self._functions: dict[Callable, tuple[int, bytes, dict]] = {}
        self._dispatchers = [
            WorkerDispatcher(i, name, extended.describe_worker(i), self._queue)
            for i, name in enumerate(extended.worker_names)
        ]

    @property
    def strategy(self) -> ParameterServerStrategy:
        return self._strategy

    # --- scheduling ---------------------------------------------------------------------------------
    def _pickled_function(self, fn: Callable) -> tuple[int, bytes, dict]:
        entry = self._functions.get(fn)
        if entry is None:
            blob, specs = pickling.dumps(fn, self._strategy)
            entry = self._functions[fn] = (next(_function_keys), blob, specs)
        return entry

    def schedule(self, fn: Callable, args: tuple | list | None = None, kwargs: dict | None = None) -> RemoteValue:
        """Queue ``fn(*args, **kwargs)`` to run on a free worker; returns its ``RemoteValue`` at once.

        ``fn`` is pickled once (like a traced function, later changes to what it captured are not
        seen); arguments are pickled on every call. Raises the first error of an earlier function.
        """
        if not callable(fn):
            raise TypeError(f"coordinator.schedule needs a callable; got {fn!r}.")
        if args is not None and not isinstance(args, (tuple, list)):
            raise TypeError(f"coordinator.schedule: args must be a tuple or list, got {type(args).__name__}: {args!r}.")
        if kwargs is not None and not isinstance(kwargs, dict):
            raise TypeError(f"coordinator.schedule: kwargs must be a dict, got {type(kwargs).__name__}.")
        self._queue.raise_error()
        self._strategy.extended.push_stale()
        key, blob, specs = self._pickled_function(fn)
        args_blob, arg_specs = pickling.dumps((tuple(args or ()), dict(kwargs or {})), self._strategy)
        result = RemoteValue()
        self._queue.put(Closure(key, blob, args_blob, {**specs, **arg_specs}, result))
        return result

    def join(self) -> None:
        """Wait until every scheduled function has finished; re-raise the first error.

        Afterwards the coordinator's copies of the strategy's variables hold the current values.
        """
        self._queue.wait_idle()
        self._strategy.extended.pull_all()

    def done(self) -> bool:
        """Whether every scheduled function has finished (re-raises the first error, as ``join``)."""
        self._queue.raise_error()
        return self._queue.idle()

    def fetch(self, val: Any) -> Any:
        """The value(s) of a RemoteValue or a structure of them, with tensors as numpy arrays."""
        if isinstance(val, RemoteValue):
            return val.fetch()
        if isinstance(val, (list, tuple)):
            return type(val)(self.fetch(v) for v in val)
        if isinstance(val, dict):
            return {k: self.fetch(v) for k, v in val.items()}
        return val

    # --- per-worker values -----------------------------------------------------------------------------
    def create_per_worker_dataset(self, dataset_fn: Callable) -> PerWorkerDataset:
        """Build ``dataset_fn()`` on every worker; ``iter()`` of the result gives per-worker iterators.

        ``dataset_fn`` takes no argument (use ``strategy.distribute_datasets_from_function`` inside it
        for an ``InputContext``) and returns an iterable of batches, typically ``md.data.Dataset``.
        """
        if not callable(dataset_fn):
            raise TypeError(
                f"create_per_worker_dataset needs a function that builds the dataset on each worker; got "
                f"{dataset_fn!r}. Wrap it: create_per_worker_dataset(lambda: dataset)."
            )
        blob, specs = pickling.dumps(dataset_fn, self._strategy)
        value_id = new_id()
        self._on_workers(worker_service.create_value, (value_id, blob, specs))
        return PerWorkerDataset(self, value_id)

    def _make_per_worker_iterator(self, value_id: int, source_id: int) -> None:
        self._on_workers(worker_service.make_iterator, (value_id, source_id))

    def _on_workers(self, fn: Callable, args: tuple) -> None:
        """Run a per-worker setup call on every live worker; a worker that fails to answer is lost."""
        live = sorted(self._queue.live_workers())
        futures = {i: rpc_layer.call_async(self._dispatchers[i].name, fn, args) for i in live}
        for i, future in futures.items():
            try:
                status, payload = rpc_layer.wait(future, self._dispatchers[i].name)
            except Exception as err:  # noqa: BLE001 - a lost worker; its dispatcher finds out too
                if not rpc_layer.is_transport_error(err):
                    raise
                self._queue.worker_lost(i, None, str(err))
                continue
            if status != "ok":
                raise payload

    def _stop(self) -> None:
        self._queue.stop()


__all__ = ["ClusterCoordinator"]
