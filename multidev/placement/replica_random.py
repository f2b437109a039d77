"""Per-replica random streams: replicas that share a torch device draw from their own deterministic stream.

Torch keeps ONE default generator per torch device, and logical devices of one physical device share
it: replica threads on logical CPUs (or logical GPUs of one GPU) that draw dropout masks, ``randn``,
``bernoulli``, ``nn.init`` ... took turns on it in whatever order the threads ran, so a run with a
fixed seed gave different results each time (issue 23, item 5).

The rule (DDP's, with every rank seeded alike): replica r behaves as rank r of a DDP job whose
processes all called ``torch.manual_seed`` with the same seed. The first replica on a torch device
draws from the device's default generator itself (as rank 0 does, so the caller sees its state
advance); each other replica on that device draws from its own copy of that generator's state,
taken when ``strategy.run`` starts (``ReplicaStreams.fork``), and continued from run to run while
the caller leaves the generator where the last run left it, as each rank continues its own (replicas
that drew different counts, a decoder loop stopping at EOS, stay apart as the ranks do). Equal
per-replica batch shapes therefore give every replica the same masks, as DDP ranks get, and a program
ported from DDP draws the same numbers; a re-seed, or draws in the caller between steps, reach every
replica at the next run (forked again from the caller's state: where replicas had drawn different
counts, DDP's ranks would each draw the caller's numbers from their own diverged stream instead). Replicas on distinct devices (one per GPU) already have their own
generator and get no stream (no cost). A program's own ``torch.Generator`` passed as ``generator=``
(torchvision's mixup, a seeded augmentation) follows the same rule: each DDP rank holds an
identically seeded copy, so the first replica draws from the object itself and every other replica
from its own copy of the state the object had when the run first drew from it (``program_generators``:
a re-seed of such an object in the step, which torch gives no way to route, is refused).

The seam is a ``TorchFunctionMode`` in the replica's thread that intercepts the ops that draw
(by name: torch's random factories and in-place samplers, dropout in all its forms, recurrent ops
with dropout, attention with dropout, ``torch.nn.init``) and runs each under one process-wide lock
with the device generator's state swapped for the replica's. A draw made by a thread that is no
replica (an input pipeline thread) while a replica's state is swapped in is not protected.

The CPU generator's state functions a replica calls act on its stream, as on its DDP rank's generator
(``distribute/random_state_hooks.py`` routes them here while strategies live): ``torch.manual_seed``
in the step re-seeds the calling replica's stream, and ``torch.get_rng_state`` / ``set_rng_state``
read and write it, which is how ``torch.utils.checkpoint`` replays the forward's dropout masks when
it recomputes a block in backward (``preserve_rng_state``); autograd runs backward without torch
function modes, so ``torch.random.fork_rng`` (the recomputation's context) enters the replica's mode
again there (``missing_mode``). Other draws in backward (a custom ``backward`` drawing noise) still
take the shared generator.
"""

from __future__ import annotations

import contextvars
import functools
import threading
from typing import Any, Callable, Sequence

import torch
import torch.nn.init
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack

from multidev._core.never_compiled import never_compiled
from multidev.placement.generator_steps import advanced, draws_between
from multidev.placement.program_generators import ProgramGenerators

_TORCH_NAMES = {
    "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "bernoulli", "multinomial",
    "normal", "poisson", "binomial", "_standard_gamma", "_sample_dirichlet", "native_dropout", "_fused_dropout",
    "dropout", "alpha_dropout", "feature_dropout", "feature_alpha_dropout", "dropout1d", "dropout2d", "dropout3d",
    "rrelu", "rrelu_", "rrelu_with_noise", "gumbel_softmax", "lstm", "gru", "rnn_tanh", "rnn_relu",
    "scaled_dot_product_attention", "multi_head_attention_forward", "fractional_max_pool2d",
    "fractional_max_pool3d", "fractional_max_pool2d_with_indices", "fractional_max_pool3d_with_indices",
}
_TENSOR_METHODS = {"bernoulli_", "normal_", "uniform_", "random_", "exponential_", "geometric_", "cauchy_",
                   "log_normal_"}
# torch.nn.init's functions draw inside themselves, where this mode no longer sees the inner ops.
_INIT_NAMES = {n for n in dir(torch.nn.init) if not n.startswith("_") and n not in {"calculate_gain", "Tensor"}}
RANDOM_OP_NAMES = frozenset(_TORCH_NAMES | _TENSOR_METHODS | _INIT_NAMES)

_LOCK = threading.Lock()
_ACTIVE: contextvars.ContextVar["ReplicaStream | None"] = contextvars.ContextVar("multidev_replica_stream", default=None)


def _default_generator(device: torch.device) -> torch.Generator:
    if device.type == "cuda":
        return torch.cuda.default_generators[device.index if device.index is not None else torch.cuda.current_device()]
    if device.type == "cpu":
        return torch.default_generator
    raise ValueError(f"No per-replica random stream for {device.type!r} devices (cpu and cuda have one).")


class ReplicaStream:
    """One replica's stream on one torch device: the device's generator itself (``owner``) or a state
    of its own, forked from it by ``ReplicaStreams.fork``. ``in_replica()`` says whether the thread
    runs as its replica now: inside a ``merge_call`` (cross-replica context: a layer built once for
    every replica) it draws from the device's generator, as code outside ``strategy.run`` does,
    whichever replica's thread runs it."""

    def __init__(self, device: torch.device, owner: bool, in_replica: Callable[[], bool] = lambda: True,
                 generators: ProgramGenerators | None = None):
        self.device = device
        self.owner = owner
        self.state: torch.Tensor | None = None
        self.left: torch.Tensor | None = None   # the device generator's state when the last run ended
        self._in_replica = in_replica
        # A program's generators this run, shared by the replicas of a strategy; ``copies`` holds this
        # replica's private copies.
        self.generators = ProgramGenerators() if generators is None else generators
        self.copies: dict[int, torch.Generator] = {}
        self.carried: dict[int, torch.Tensor] = {}   # this replica's state of each generator as the last run left it

    @never_compiled   # (holds _LOCK while torch's Python runs: never behind dynamo's compile lock)
    def draw(self, func, args: tuple, kwargs: dict) -> Any:
        """Run the random op ``func`` on this stream (under the lock every replica's draw takes)."""
        with _LOCK:
            if self.owner or not self._in_replica():
                return func(*args, **kwargs)
            generator = _default_generator(self.device)
            saved = generator.get_state()
            generator.set_state(self.state)
            try:
                return func(*args, **kwargs)
            finally:
                self.state = generator.get_state()
                generator.set_state(saved)

    @never_compiled   # (holds _LOCK while torch's Python runs: never behind dynamo's compile lock)
    def get_rng_state(self, original: Callable[[], torch.Tensor]) -> torch.Tensor:
        """``torch.get_rng_state()`` (the CPU generator's) in this replica: its own state (the device
        generator's for the first); replicas on GPUs share the CPU generator, so theirs is torch's."""
        with _LOCK:
            return original() if self.owner or self.device.type != "cpu" else self.state.clone()

    @never_compiled   # (holds _LOCK while torch's Python runs: never behind dynamo's compile lock)
    def set_rng_state(self, original: Callable[[torch.Tensor], None], new_state: torch.Tensor) -> None:
        """``torch.set_rng_state(state)`` in this replica: checked by a generator, kept as its own state."""
        with _LOCK:
            if self.owner or self.device.type != "cpu":
                return original(new_state)
            generator = torch.Generator(device=self.device)
            generator.set_state(new_state)   # torch's own check of the state
            self.state = generator.get_state()

    @never_compiled   # (holds _LOCK while torch's Python runs: never behind dynamo's compile lock)
    def manual_seed(self, original: Callable[[Any], torch.Generator], seed: Any) -> torch.Generator:
        """``torch.manual_seed(seed)`` in this replica: its stream restarts from ``seed``, as a DDP rank's
        generator does (the first replica seeds torch's generators, as rank 0 seeds its own)."""
        with _LOCK:
            if self.owner:
                return original(seed)
            generator = torch.Generator(device=self.device)
            generator.manual_seed(seed)
            self.state = generator.get_state()
            return _default_generator(self.device)

    @never_compiled   # (holds _LOCK while torch's Python runs: never behind dynamo's compile lock)
    def draw_from(self, func, args: tuple, kwargs: dict, generator: torch.Generator) -> Any:
        """Run ``func`` with the program's own ``generator=``: on the object itself for the first
        replica (and in a ``merge_call``), on this replica's copy of its state at the run's first
        draw otherwise, whichever thread reaches it first."""
        with _LOCK:
            entry = self.generators.entry(generator)
            in_replica = self._in_replica()
            if self.owner or not in_replica:
                return self.generators.draw_on_object(entry, self if in_replica else None, func, args, kwargs)
            self.generators.note(entry, self, self.generators.changed_after_first(entry))
            copy = self.copies.get(id(generator))
            if copy is None:
                copy = self.copies[id(generator)] = torch.Generator(device=generator.device)
                copy.set_state(self.generators.start(entry, self.carried.get(id(generator))))
            return func(*args, **{**kwargs, "generator": copy})


class ReplicaRandomMode(TorchFunctionMode):
    """Routes the random ops of a replica's thread to its ``ReplicaStream``; every other op passes."""

    def __init__(self, stream: ReplicaStream):
        super().__init__()
        self.stream = stream
        self._tokens: list[contextvars.Token] = []

    def __enter__(self):
        self._tokens.append(_ACTIVE.set(self.stream))
        return super().__enter__()

    def __exit__(self, *exc_info):
        try:
            return super().__exit__(*exc_info)
        finally:
            _ACTIVE.reset(self._tokens.pop())

    def __torch_function__(self, func, types, args=(), kwargs=None):
        # Every torch op and tensor attribute access of the replica's thread comes through here
        # (about 1 us each, most of it torch's own dispatch to the mode): no allocation on the way.
        if getattr(func, "__name__", None) in RANDOM_OP_NAMES:
            generator = kwargs.get("generator") if kwargs else None
            if generator is None:
                return self.stream.draw(func, args, kwargs or {})
            return self.stream.draw_from(func, args, kwargs, generator)
        return func(*args, **kwargs) if kwargs else func(*args)


def _caller_draws(device: torch.device, left: torch.Tensor, now: torch.Tensor) -> int | None:
    """How many draws the caller made from ``device``'s generator between runs (None: it re-seeded it,
    drew a cached normal, or the device is no CPU)."""
    return draws_between(left, now) if device.type == "cpu" else None


def active_stream() -> ReplicaStream | None:
    """The stream of the replica this thread runs now, or None (no replica, a replica alone on its
    device, inside a ``merge_call``)."""
    stream = _ACTIVE.get()
    return stream if stream is not None and stream._in_replica() else None


def missing_mode() -> ReplicaRandomMode | None:
    """A mode for this replica's stream where its thread runs without it: torch runs autograd's
    backward (hooks, a checkpointed block recomputed there) with no torch function mode, so draws
    there would take the device generator every replica shares. None where the mode is on the stack
    or no replica stream is active (a second mode of one stream would take the lock twice)."""
    stream = active_stream()
    if stream is None or any(isinstance(m, ReplicaRandomMode) for m in _get_current_function_mode_stack()):
        return None
    return ReplicaRandomMode(stream)


def backward_in_replica_mode(original: Callable) -> Callable:
    """``original`` (torch.autograd's call into the engine) in the replica's mode: the engine runs backward
    with the modes active at that call, and the replica's was popped by the ``backward`` call that led
    there (a mode's own handler runs without it), so hooks and custom ``backward``s drew from the device
    generator every replica shares. (Draws check ``in_replica`` themselves: no check here.)"""
    @functools.wraps(original)
    def run_backward(*args: Any, **kwargs: Any) -> Any:
        stream = _ACTIVE.get()
        if stream is None or any(isinstance(m, ReplicaRandomMode) for m in _get_current_function_mode_stack()):
            return original(*args, **kwargs)
        with ReplicaRandomMode(stream):
            return original(*args, **kwargs)

    run_backward._multidev_wrapped = True
    return run_backward


class ReplicaStreams:
    """The streams of a strategy's local replicas (None for each replica alone on its device)."""

    def __init__(self, torch_devices: Sequence[torch.device], in_replica: Callable[[], bool]):
        seen: set = set()
        shared = {d for d in torch_devices if sum(1 for e in torch_devices if e == d) > 1}
        self.generators = ProgramGenerators()
        self.streams: list[ReplicaStream | None] = []
        for d in torch_devices:
            self.streams.append(ReplicaStream(d, d not in seen, in_replica, self.generators) if d in shared else None)
            seen.add(d)

    def fork(self) -> None:
        """At the start of a run (caller thread): every non-owner stream takes its device generator's
        current state, as every identically seeded DDP rank starts the step from the same state, unless
        the generator is where the last run left it: then each replica continues its own stream, as each
        rank continues its generator (replicas that drew different counts, a decoder loop stopping at
        EOS, stay apart as the ranks do). Where the caller only drew from it since (a DataLoader epoch's
        base seed, ``torch.rand`` in the loop), a replica standing apart advances its own stream by as many
        draws, as its rank's process draws those from its own generator (``generator_steps``); a re-seed
        forks every replica from it. The program's own generators are forked at their first draw."""
        self.generators.fork()
        self.fork_devices()

    def fork_devices(self) -> None:
        """``fork`` for the device generators only (a per-replica input pipeline's read, between runs, draws
        on its replica's stream: ``pipeline_random``; the program's generators are the runs' alone)."""
        current, caller_draws = self._generator_states(), {}
        for stream in self.streams:
            if stream is not None:
                stream.copies.clear()
                if not stream.owner:
                    now = current[stream.device]
                    if stream.left is None or stream.state is None or torch.equal(stream.state, stream.left):
                        stream.state = now   # (in step with the caller: the caller's state)
                    elif not torch.equal(now, stream.left):
                        if stream.device not in caller_draws:
                            caller_draws[stream.device] = _caller_draws(stream.device, stream.left, now)
                        draws = caller_draws[stream.device]
                        stream.state = now if draws is None else advanced(stream.state, draws)

    def join(self) -> None:
        """At the end of a run (caller thread): note where each device generator was left, so that the
        next run can tell whether the caller drew from it or re-seeded it in between (``fork``)."""
        self.generators.join([s for s in self.streams if s is not None and not s.owner])
        self.join_devices()

    def join_devices(self) -> None:
        """``join`` for the device generators only (see ``fork_devices``)."""
        left = self._generator_states()
        for stream in self.streams:
            if stream is not None and not stream.owner:
                stream.left = left[stream.device]

    def _generator_states(self) -> dict:
        """Each replica-shared device's default generator state, read once per device (one tensor,
        never written: ``fork`` and ``join`` only compare and copy it)."""
        states: dict = {}
        for stream in self.streams:
            if stream is not None and not stream.owner and stream.device not in states:
                states[stream.device] = _default_generator(stream.device).get_state()
        return states

    def mode_for(self, replica_id: int) -> ReplicaRandomMode | None:
        """The mode replica ``replica_id``'s thread enters for its task (None: it needs none)."""
        stream = self.streams[replica_id]
        return None if stream is None else ReplicaRandomMode(stream)


__all__ = ["ReplicaStreams", "ReplicaStream", "ReplicaRandomMode", "RANDOM_OP_NAMES", "active_stream", "missing_mode",
           "backward_in_replica_mode"]
