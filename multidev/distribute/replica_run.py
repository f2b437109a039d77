"""Running a replica function once per local replica: what ``strategy.run`` does after the checks.

A strategy owns a list of replica devices. ``run`` calls the replica function once per replica,
concurrently (one replica inline in the caller's thread; several each in a long-lived thread of
its own, replica 0 included, while the caller waits: ``replica_threads.py`` says why), each inside
its replica environment (``values/context.ReplicaEnv``), device scope, CUDA stream, random-number
stream and the caller's grad/autocast modes. Collectives meet in the group's ``Rendezvous``. The
outputs come back regrouped (``PerReplica`` where replicas differ); the first replica error is
raised, the user's own before the aborts it caused.

``ReplicatedExtended`` (distribute_lib.py) owns one ``ReplicaRunner``; it prepares the variables
before each run (``prepare``) and otherwise hands the call over.
"""

from __future__ import annotations

import contextlib
import sys
import weakref
from typing import Any, Callable, Sequence

import torch

from multidev._core.eager_tensor import readable
from multidev._core.errors import AbortedError
from multidev.devices import registry, stream_order
from multidev import placement
from multidev.placement.replica_random import ReplicaStreams
from multidev.distribute import compiled_step, hook_state, module_hooks, replica_attributes, replica_hyperparameters
from multidev.distribute import shared_leaves
from multidev.distribute.shared_tensors import SharedTensors
from multidev.distribute.host_random import HostStreams
from multidev.distribute.replica_context import merge_call_strategy
from multidev.distribute.replica_group import ReplicaGroup, RunningSteps
from multidev.distribute.replica_threads import ReplicaThreads
from multidev.values import context
from multidev.values.distributed import DistributedValues, map_structure, regroup
from multidev.values.variables import DistributedVariable, Variable


class ReplicaRunner:
    """Runs replica functions on one strategy's local replicas (see the module docstring)."""

    def __init__(self, strategy: Any, devices: Sequence[registry.Device], group: ReplicaGroup, contexts: list,
                 distributes: bool, variables: Callable[[], list] = list):
        self._strategy_ref = weakref.ref(strategy)
        self._devices = list(devices)
        self._torch_devices = [d.torch_device for d in self._devices]
        self._group = group
        self._contexts = contexts
        self._distributes = distributes   # a distributing layout: refuse modules built outside the scope
        self._variables = variables       # the strategy's live distributed variables
        self._threads: ReplicaThreads | None = None
        self._watched = _FirstRuns()
        self._leaves_checked = _FirstRuns()   # step functions whose backward shared_leaves checked once
        self._shared_tensors = SharedTensors(type(strategy).__name__)   # plain tensors the replicas all write
        #: The running call's per-replica step notes (read by backward_reduce).
        self.steps = RunningSteps()
        self._streams = [registry.stream_for(d) for d in self._devices]
        # Replicas sharing a torch device draw random numbers from their own streams (DDP's rule).
        self._random_streams = ReplicaStreams(self._torch_devices, lambda: context.current_replica_id() is not None)
        # Likewise Python's ``random`` and numpy's global generator, shared by every replica thread.
        self._host_streams = HostStreams(len(self._devices), lambda: context.current_replica_id() is not None)
        # CPU replicas share the cores: each replica's kernels get an equal share of torch's
        # intra-op threads (a per-thread OpenMP setting) instead of all oversubscribing them.
        cpu_replicas = sum(1 for d in self._devices if d.torch_device.type == "cpu")
        self._intra_op_threads = max(1, torch.get_num_threads() // cpu_replicas) if cpu_replicas > 1 else None

    @property
    def _strategy(self) -> Any:
        return self._strategy_ref()

    def run(self, fn: Callable, args: tuple, kwargs: dict, step: Any, prepare: Callable[[], None]) -> Any:
        """``fn`` once per replica, after ``prepare()`` (the strategy brings its variables up to date);
        ``step`` (per-call inputs, e.g. Keras's ``StepInputs``) reaches every replica as
        ``replica_env().step``."""
        if context.current_replica_id() is not None:
            raise RuntimeError(
                "strategy.run cannot be called inside a replica function (replica context): "
                "use md.distribute.get_replica_context().merge_call() to go back to cross-replica context."
            )
        if self.steps.active and merge_call_strategy() is self._strategy:
            return self._call_in_merge_call(fn, args, kwargs, step)
        if self.steps.running_elsewhere():
            raise RuntimeError("strategy.run is already running on another thread for this strategy.")
        registry.initialize()
        n = len(self._devices)
        _check_replica_counts((args, kwargs), n, "strategy.run")
        prepare()
        self._random_streams.fork()
        self._host_streams.fork()
        modes = context.CallerModes.capture({d.type for d in self._torch_devices})
        if self._threads is not None:  # replicas left running by a failed run must not join this one
            self._threads.wait_idle()
        self._group.rendezvous.reset()
        steps = [context.ReplicaStep() for _ in range(n)]
        watch = n > 1 and self._distributes and not self._watched.seen(fn)
        shared = self._shared_tensors.start(fn, args, kwargs, self._one_storage_variables) \
            if n > 1 and self._distributes else None
        tasks = [self._replica_task(r, fn, self._replica_args(args, r), self._replica_args(kwargs, r), modes, step,
                                    steps[r], shared and shared.mode()) for r in range(n)]
        stream_order.replicas_after_caller(self._streams)   # (their inputs, copied above on the caller's stream)
        entered = []
        try:   # begin inside: a Ctrl-C landing right after it must not leave the run marked active
            replica_attributes.enter_run()
            entered.append(replica_attributes)
            replica_hyperparameters.enter_run()
            entered.append(replica_hyperparameters)
            hook_state.enter_run()
            entered.append(hook_state)
            self.steps.begin(steps)
            if n == 1:
                outcomes = [_outcome(tasks[0])]
                stream_order.caller_after_replicas(self._streams)
            else:
                compiled_step.refuse_compiled_autograd(self._strategy, n)
                if self._threads is None:
                    self._threads = ReplicaThreads(n, type(self._strategy).__name__, self._group.rendezvous.abort,
                                                   busy_wait_s=self._group.rendezvous.timeout)
                leaves = self._distributes and not self._leaves_checked.seen(fn)
                with module_hooks.shared_module_guard(self._strategy) if watch else contextlib.nullcontext() \
                        as buffer_watch, \
                        shared_leaves.watching(self._strategy) if leaves else contextlib.nullcontext() as leaf_watch:
                    outcomes = self._threads.run(tasks)
                    stream_order.caller_after_replicas(self._streams)   # (before the checks read their tensors)
                ok = all(ok for ok, _ in outcomes)
                if watch and ok:
                    buffer_watch.refuse_written()
                    self._watched.add(fn)
                if shared is not None and ok:
                    self._shared_tensors.finish(shared, n)
                if leaves and ok and leaf_watch.walked:   # a backward of this step function was checked
                    self._leaves_checked.add(fn)
        finally:
            self.steps.end()
            self._random_streams.join()
            self._host_streams.join()
            for module in entered:
                module.leave_run()
        self._raise_first_error(outcomes)
        # A result that requires grad (``w * x``, a loss) reads with .numpy(), per replica, as TF's do.
        return regroup([map_structure(readable, value) for _, value in outcomes])

    @property
    def random_streams(self) -> ReplicaStreams:
        """The replicas' own random streams (pipelines of ``distribute_datasets_from_function`` read on them)."""
        return self._random_streams

    def _one_storage_variables(self) -> list:
        """The variables whose replica copies are one storage (CentralStorageStrategy on one memory)."""
        if not self._group.shared_storage:
            return []
        return [v for v in self._variables() if len(v._components) > 1]

    def _call_in_merge_call(self, fn: Callable, args: tuple, kwargs: dict, step: Any) -> Any:
        """``call_for_each_replica`` inside ``merge_call`` (TensorFlow allows it): the replica threads
        are waiting for this merge_call, so each replica's call runs here, one after another, in its
        replica context and device scope; the first exception is the user's own. Collectives inside
        such a nested call have no other replica to meet and are not supported."""
        modes = context.CallerModes.capture({d.type for d in self._torch_devices})
        results = []
        for r, device in enumerate(self._devices):
            env = context.ReplicaEnv(strategy=self._strategy, replica_context=self._contexts[r], replica_id=r,
                                     device=device, stream=self._streams[r], modes=modes, step=step,
                                     num_replicas_in_sync=self._strategy.num_replicas_in_sync)
            token = context.enter_replica_env(env)
            try:
                with placement.device_scope(device), modes.applied(device.torch_device.type):
                    results.append(fn(*self._replica_args(args, r), **self._replica_args(kwargs, r)))
            finally:
                context.exit_replica_env(token)
        return regroup(results)

    def _replica_args(self, structure: Any, replica_id: int) -> Any:
        device = self._torch_devices[replica_id]

        def pick(v: Any) -> Any:
            if isinstance(v, DistributedVariable):
                return v
            if isinstance(v, DistributedValues):
                v = v._local(replica_id)
            if isinstance(v, torch.Tensor) and v.device != device and not isinstance(v, Variable):
                v = stream_order.to_device(v, device)
            return v

        return map_structure(pick, structure)

    def _replica_task(self, r: int, fn: Callable, args: tuple, kwargs: dict, modes: context.CallerModes,
                      step: Any, replica_step: context.ReplicaStep, write_mode: Any = None) -> Callable:
        device = self._devices[r]
        rendezvous = self._group.rendezvous
        # Everything replica r is, for this call: one immutable value, set once when its task starts.
        env = context.ReplicaEnv(strategy=self._strategy, replica_context=self._contexts[r], replica_id=r,
                                 device=device, stream=self._streams[r], modes=modes, step=step,
                                 replica_step=replica_step, num_replicas_in_sync=self._strategy.num_replicas_in_sync)
        intra_op_threads = self._intra_op_threads if device.torch_device.type == "cpu" else None
        random_mode = self._random_streams.mode_for(r) or contextlib.nullcontext()
        host_random = self._host_streams.scope(r) or contextlib.nullcontext()
        write_mode = write_mode or contextlib.nullcontext()   # (shared_tensors: a watched run)

        def task() -> Any:
            token = context.enter_replica_env(env)
            if intra_op_threads is not None and torch.get_num_threads() != intra_op_threads:
                # CPU replicas always run in the strategy's own long-lived threads: set once and kept,
                # so torch's process-wide thread pools are not resized twice per replica per step.
                torch.set_num_threads(intra_op_threads)
            try:
                with random_mode, host_random, write_mode, placement.device_scope(device), \
                        modes.applied(device.torch_device.type), _on_stream(env.stream):
                    return fn(*args, **kwargs)
            except BaseException as exc:
                rendezvous.abort(exc)
                raise
            finally:
                rendezvous.replica_finished(r)
                context.exit_replica_env(token)

        return task

    def _raise_first_error(self, outcomes: list) -> None:
        failures = [(r, e) for r, (ok, e) in enumerate(outcomes) if not ok]
        if not failures:
            return
        primary = [(r, e) for r, e in failures if not isinstance(e, AbortedError)] or failures
        # a replica's backward that crossed into another's copy is the consequence of a shared write that another
        # replica may have been refused for (a forward hook's dict): that refusal names the cause, whichever came first
        primary = [(r, e) for r, e in primary if not getattr(e, "_md_consequence", False)] or primary
        r, error = primary[0]
        note = f"(raised in replica {r} on {self._devices[r].name})"
        if self._group.shared_storage and "modified by an inplace operation" in str(error):
            note += _SHARED_STORAGE_NOTE.format(strategy=type(self._strategy).__name__)
        if sys.version_info >= (3, 11):
            if note not in getattr(error, "__notes__", ()):
                error.add_note(note)
        raise error


def _on_stream(stream: Any) -> Any:
    return contextlib.nullcontext() if stream is None else torch.cuda.stream(stream)


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


_SHARED_STORAGE_NOTE = (
    "\n{strategy} keeps one copy of each variable that every replica reads: a parameter written in place "
    "inside strategy.run (SwAV's `prototypes.weight.copy_(w)`, a max-norm `w.copy_(torch.renorm(...))`) changed "
    "under another replica's forward or backward. Make the write outside strategy.run (between steps), or use "
    "MirroredStrategy, where each replica writes its own copy.")


class _FirstRuns:
    """The step functions whose first successful run of several replicas the shared-module guard
    watched. A step calls the same modules every time, and the guard's global forward pre-hook puts
    every module call on torch's slow path (~3 us: 6% of the scaling probe's step at N=2), so later
    runs of the same function go without it. A function is its object (a closure made again for
    another model is another function); a bound method is its object and function (``self.step`` is
    made anew at each access). Held weakly: a step's closure keeps its model alive."""

    def __init__(self) -> None:
        self._seen: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    @staticmethod
    def _key(fn: Callable) -> tuple[Any, Any]:
        owner = getattr(fn, "__self__", None)
        func = getattr(fn, "__func__", fn)
        return (func, None) if owner is None else (owner, func)

    def seen(self, fn: Callable) -> bool:
        holder, func = self._key(fn)
        try:
            funcs = self._seen.get(holder)
        except TypeError:          # not weakly referenceable: watch every run
            return False
        return funcs is not None and (func is None or id(func) in funcs)

    def add(self, fn: Callable) -> None:
        holder, func = self._key(fn)
        try:
            funcs = self._seen.setdefault(holder, set())
        except TypeError:
            return
        if func is not None:
            funcs.add(id(func))    # a class's function: lives as long as its class

