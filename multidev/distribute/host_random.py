"""Per-replica host random streams: Python's ``random`` and numpy's global ``np.random`` in ``strategy.run``
draw as each rank of a DDP job whose processes were all seeded alike.

Replica threads share one process, so ``random.random()``, ``np.random.beta(a, a)`` (MixUp's lambda),
``random.randint`` (a crop offset), ``random.random() < p`` (an augmentation choice) drawn in the step
took turns on one interpreter-wide state: replica 0 and replica 1 drew consecutive values in an order
the thread scheduler picked, where every DDP rank seeded alike draws the same value. This module
applies torch's rule (``placement/replica_random.py``) to the host's generators:

* the first local replica draws from the object itself (``random``'s hidden instance, numpy's global
  ``RandomState``, a program's ``random.Random``), as rank 0 does, so the caller sees it advance;
* every other replica draws from its own copy of the object's state at the run's first draw from it
  (taken before any replica draws: the state every rank starts the step from);
* ``random.seed`` / ``np.random.seed`` / ``setstate`` / ``set_state`` in the step act on the calling
  replica's stream, and ``getstate`` / ``get_state`` read it;
* an object only other replicas drew from in a run (one replica's own ``random.Random``, kept in a
  list by replica id) takes that replica's final state when the run ends, so its next run continues
  where it stopped, as on that rank; an object several replicas drew from keeps the first's.
* while the caller leaves an object where the last run left it, each other replica continues its own
  state of it in the next run, as each rank continues its generator: ``random.seed(seed + rank)`` run
  once in ``strategy.run`` lasts, and replicas that drew different counts stay apart; a re-seed or a
  draw in the caller between runs reaches every replica at the next run (a replica that draws nothing
  in that run keeps the run's starting state, as its rank would).

Routed while a strategy lives (``live_hooks.STRATEGY_HOOKS``): the methods of ``random.Random`` that
read or write its state (its class: every instance, ``random``'s own included; the others reach the
state through them), ``random``'s module functions of those, and ``np.random``'s functions of its
global ``RandomState``. The cost (``benchmarks/host_random_cost.py``, on 2 busy cores): outside
replica threads (and in ``merge_call``) a routed call reads one context variable more, 0.1-0.3 us
(``random.randint`` makes one or two); in a replica about as much again; a run whose step draws forks
the states at its first draws: about 10 us for ``random``, 0.1-0.25 ms for ``np.random`` (numpy reads
and writes its 624-word state element by element), and at its end reads each replica's states once
more to carry them (a step drawing once from each: 0.18 ms more per run than without streams, on 2
busy cores that gave anything from 0.18 to 0.97 ms). Runs that draw nothing pay nothing.

Not covered (each replica shares the object, as before): names bound before the first strategy
existed to ``random``'s routed functions (``from random import random``, ``seed``, ``gauss``...) or
to ``np.random``'s (``from numpy.random import rand``) keep the unrouted function (``random``'s
others, ``from random import randint`` / ``choice`` / ``shuffle`` / ``uniform``..., reach the state
through the routed methods and follow the rule however bound); numpy ``Generator`` objects
(``np.random.default_rng(0)``) and ``RandomState`` instances created outside the step (numpy's
classes are compiled: their methods cannot be wrapped): create those inside the step (each replica
then holds its own, seeded alike, as each rank does) or draw from ``random`` / ``np.random`` / a
``random.Random``. ``random.SystemRandom`` has no state to copy and is shared (it is no stream).
"""

from __future__ import annotations

import contextvars
import functools
import random
import threading
import weakref
from typing import Any, Callable

import numpy as np

from multidev.distribute.host_random_steps import numpy_steps, python_steps

_LOCK = threading.Lock()
_ACTIVE: contextvars.ContextVar["HostStream | None"] = contextvars.ContextVar("multidev_host_stream", default=None)
# The methods of random.Random that read or write its state; the others reach it through these (self.random(),
# self.getrandbits(), self._randbelow()), so they draw from whichever object these pick.
_RANDOM_METHODS = ("random", "getrandbits", "seed", "getstate", "setstate", "gauss")
_NUMPY_GLOBAL = np.random.mtrand._rand
_MAX_SPARES = 8
# np.random's functions of its global RandomState that are no bound methods of it: name -> method of a RandomState.
_NUMPY_FUNCTIONS = {"seed": "seed", "ranf": "random_sample", "sample": "random_sample"}


class _Copy(random.Random):
    """A replica's private copy of a ``random.Random``: its calls are never routed again."""


class HostStream:
    """One local replica's view of the host's generators for a strategy's runs (see the module docstring)."""

    def __init__(self, replica_id: int, run_states: dict, in_replica: Callable[[], bool], left: dict | None = None):
        self.replica_id = replica_id
        self.owner = replica_id == 0
        # Shared by the strategy's replicas: id(object) -> [object, state at the run's first draw, drawers,
        # get_state, draws the caller made from it since the last run left it (None: fork from the caller)].
        self.run_states = run_states
        # Shared: id(object) -> (reference, state at the last run's end, whether a replica's state stands apart).
        self.left: dict = {} if left is None else left
        self.carried: dict[int, Any] = {}   # this replica's state of each object when its last run ended
        self.copies: dict[int, Any] = {}   # this replica's copies (the first replica's objects) this run
        # Copies of past runs, reused: building a numpy RandomState costs more than setting its state.
        self._spares: dict[Callable, list] = {}
        self._made: list[tuple[Callable, Any]] = []
        self._in_replica = in_replica

    def release(self) -> None:
        """Forget this run's copies (kept as spares for the next runs)."""
        for make_copy, copy in self._made:
            spares = self._spares.setdefault(make_copy, [])
            if len(spares) < _MAX_SPARES:
                spares.append(copy)
        self._made.clear()
        self.copies.clear()

    def target(self, obj: Any, get_state: Callable[[Any], Any], make_copy: Callable[[Any, Any], Any]) -> Any:
        """The object this replica's call on ``obj`` acts on: ``obj`` itself (the first replica, a
        ``merge_call``) or this replica's copy of ``obj``'s state at the run's first draw from it.
        After a replica's first call on ``obj`` in a run this is one dictionary read (and, for the
        other replicas, one context read)."""
        copy = self.copies.get(id(obj))
        if copy is not None:
            return copy if copy is obj or self._in_replica() else obj
        if not self.owner and not self._in_replica():
            return obj
        with _LOCK:
            entry = self.run_states.get(id(obj))
            if entry is None:
                state = _state_or_none(obj, get_state)
                entry = self.run_states[id(obj)] = [obj, state, set(), get_state, self._caller_draws(obj, state)]
        entry[2].add(self.replica_id)
        if self.owner or entry[1] is None:
            copy = obj
        else:
            spares = self._spares.get(make_copy)
            copy = make_copy(self._start(id(obj), entry), spares.pop() if spares else None)
            self._made.append((make_copy, copy))
        self.copies[id(obj)] = copy
        return copy

    def _caller_draws(self, obj: Any, state: Any) -> int | None:
        """How many draws the caller made from ``obj`` since the last run that drew from it left it (0: it
        is where that run left it); None where it re-seeded it, or no replica's state stands apart (every
        replica then starts from the caller's state, which is then what advancing them would give)."""
        record = self.left.get(id(obj))
        if state is None or record is None or record[0]() is not obj:
            return None
        if _same_state(state, record[1]):
            return 0
        return _STEPS[type(state)].draws_between(record[1], state) if record[2] else None

    def _start(self, key: int, entry: list) -> Any:
        """This replica's state of an object at this run's start: its own, advanced by the caller's draws."""
        carried, draws = self.carried.get(key), entry[4]
        if carried is None or draws is None:
            return entry[1]
        return carried if draws == 0 else _STEPS[type(carried)].advanced(carried, draws)


def _reference(obj: Any) -> Callable[[], Any]:
    """A weak reference where the object takes one (numpy's global RandomState takes none: it lives on)."""
    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: obj


def _same_state(a: Any, b: Any) -> bool:
    """Equal generator states: ``random``'s tuples, or numpy's dictionaries holding an array."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and np.array_equal(a, b)
    return a == b


def _state_or_none(obj: Any, get_state: Callable[[Any], Any]) -> Any:
    """``obj``'s state, or None where it has none to copy: ``random.SystemRandom`` (shared), and a
    ``random.Random`` being built (its ``__init__`` seeds it: one built in the step is the replica's own)."""
    if isinstance(obj, random.Random) and (isinstance(obj, random.SystemRandom) or not hasattr(obj, "gauss_next")):
        return None
    return get_state(obj)


class HostStreams:
    """The host streams of a strategy's local replicas (none with a single replica: nothing to share)."""

    def __init__(self, num_replicas: int, in_replica: Callable[[], bool]):
        self.run_states: dict = {}
        self.left: dict = {}
        self.streams = [HostStream(r, self.run_states, in_replica, self.left) for r in range(num_replicas)] \
            if num_replicas > 1 else []

    def fork(self) -> None:
        """At the start of a run (caller thread): forget the last run's states and copies; each object is
        forked at its first draw of this run."""
        self.run_states.clear()
        for stream in self.streams:
            stream.release()

    def join(self) -> None:
        """At the end of a run: an object no first replica drew from, and exactly one other replica did,
        takes that replica's final state (its next run continues it); every other replica keeps its state
        of each object the run drew from, for the next run (``_carry``)."""
        for key, entry in list(self.run_states.items()):
            obj, start, drawers, get_state, _ = entry
            if len(drawers) == 1 and 0 not in drawers:
                copy = self.streams[next(iter(drawers))].copies.get(key)
                if copy is not None and copy is not obj:
                    _write_back(obj, copy)
            if start is not None:
                self._carry(key, entry)
        self._forget_dead()
        self.run_states.clear()
        for stream in self.streams:
            stream.release()

    def _carry(self, key: int, entry: list) -> None:
        """Keep each other replica's state of the object for the next run (one that drew nothing holds
        its state at this run's start), where the run left the object, and whether any replica's state
        stands apart from it."""
        obj, get_state = entry[0], entry[3]
        for stream in self.streams[1:]:
            copy = stream.copies.get(key)
            stream.carried[key] = get_state(copy) if copy is not None and copy is not obj else stream._start(key, entry)
        final = get_state(obj)
        apart = any(not _same_state(stream.carried[key], final) for stream in self.streams[1:])
        self.left[key] = (_reference(obj), final, apart)

    def _forget_dead(self) -> None:
        """Drop the records of objects gone (a ``random.Random`` made in a step), with their ids."""
        for key in [k for k, (ref, _, _) in self.left.items() if ref() is None]:
            del self.left[key]
            for stream in self.streams:
                stream.carried.pop(key, None)

    def scope(self, replica_id: int) -> "_Scope | None":
        """The context replica ``replica_id``'s thread runs its task in (None: a single replica)."""
        return _Scope(self.streams[replica_id]) if self.streams else None


class _Scope:
    def __init__(self, stream: HostStream):
        self.stream = stream
        self._tokens: list = []

    def __enter__(self) -> None:
        self._tokens.append(_ACTIVE.set(self.stream))

    def __exit__(self, *exc_info: Any) -> None:
        _ACTIVE.reset(self._tokens.pop())


# --- the two kinds of objects: random.Random and numpy's global RandomState --------------------------------
_ORIGINAL_RANDOM = {n: getattr(random.Random, n) for n in _RANDOM_METHODS}


def _random_state(obj: random.Random) -> Any:
    return _ORIGINAL_RANDOM["getstate"](obj)


def _random_copy(state: Any, spare: _Copy | None) -> _Copy:
    copy = spare or _Copy(0)   # (seeded cheaply: its state is replaced)
    _ORIGINAL_RANDOM["setstate"](copy, state)
    return copy


def _numpy_state(obj: np.random.RandomState) -> Any:
    return obj.get_state(legacy=False)


def _numpy_copy(state: Any, spare: np.random.RandomState | None) -> np.random.RandomState:
    copy = np.random.RandomState(0) if spare is None else spare
    copy.set_state(state)
    return copy


# How the caller's draws between runs advance a replica's state, by the state's type (random's tuple, numpy's dict).
_STEPS = {tuple: python_steps(_random_state, _ORIGINAL_RANDOM["setstate"], _ORIGINAL_RANDOM["getrandbits"],
                             _same_state),
          dict: numpy_steps(_same_state)}


def _write_back(obj: Any, copy: Any) -> None:
    if isinstance(copy, _Copy):
        _ORIGINAL_RANDOM["setstate"](obj, _random_state(copy))
    else:
        obj.set_state(_numpy_state(copy))


def _routed_method(original: Callable) -> Callable:
    @functools.wraps(original)
    def method(self, *args: Any, **kwargs: Any) -> Any:
        stream = _ACTIVE.get()
        if stream is None or type(self) is _Copy or stream.copies.get(id(self)) is self:   # (the first replica's)
            return original(self, *args, **kwargs)
        return original(stream.target(self, _random_state, _random_copy), *args, **kwargs)

    method._multidev_wrapped = True
    return method


def _routed_numpy(name: str, original: Callable) -> Callable:
    method_name = _NUMPY_FUNCTIONS.get(name, name)

    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        stream = _ACTIVE.get()
        if stream is None:
            return original(*args, **kwargs)
        target = stream.target(_NUMPY_GLOBAL, _numpy_state, _numpy_copy)
        if target is _NUMPY_GLOBAL:
            return original(*args, **kwargs)
        return getattr(target, method_name)(*args, **kwargs)

    call._multidev_wrapped = True
    return call


def _numpy_names() -> list[str]:
    bound = [n for n in dir(np.random) if getattr(getattr(np.random, n), "__self__", None) is _NUMPY_GLOBAL]
    return bound + [n for n in _NUMPY_FUNCTIONS if hasattr(np.random, n)]


def install() -> Callable[[], None]:
    """Route ``random.Random``'s methods, ``random``'s and ``np.random``'s module functions; returns how
    to put them back (``live_hooks.STRATEGY_HOOKS`` calls both while strategies live)."""
    if getattr(random.Random.random, "_multidev_wrapped", False):
        return lambda: None
    own = {n: n in random.Random.__dict__ for n in _RANDOM_METHODS}
    # random's functions are bound methods of its hidden instance: those of the routed methods are rebound.
    modules = {(random, n): getattr(random, n) for n in _RANDOM_METHODS
               if getattr(getattr(random, n, None), "__self__", None) is random._inst}
    modules.update({(np.random, n): getattr(np.random, n) for n in _numpy_names()})
    for name in _RANDOM_METHODS:
        setattr(random.Random, name, _routed_method(_ORIGINAL_RANDOM[name]))
    for (module, name), fn in modules.items():
        routed = getattr(random._inst, name) if module is random else _routed_numpy(name, fn)
        setattr(module, name, routed)

    def remove() -> None:
        for (module, name), fn in modules.items():
            setattr(module, name, fn)
        for name, defined in own.items():
            if defined:
                setattr(random.Random, name, _ORIGINAL_RANDOM[name])
            else:
                delattr(random.Random, name)

    return remove


__all__ = ["HostStreams", "HostStream", "install"]
