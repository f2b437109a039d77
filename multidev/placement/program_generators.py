"""A program's own ``torch.Generator`` objects drawn with ``generator=`` by a strategy's replicas in a run.

Each DDP rank holds its own identically seeded generator; the replica threads share one object. The first
replica draws from the object itself (the caller sees it advance, as rank 0's process does), every other
replica from its own copy of the object's state at the run's first draw (``replica_random.ReplicaStream``).
torch's ``Generator`` is an immutable C type: its ``manual_seed`` / ``set_state`` / ``seed`` cannot be
routed to the calling replica's copy. Called in the step, they reset the one object under the first
replica's draws (it drew the same numbers again, in the threads' order) and never reached the other
replicas' copies. So such a change is refused: between the first replica's draws on the object (a state
other than its last draw left), after them (seen when the run ends), or before the run's first draw (a
state other than at the run's start, for the generators the last run drew from). A generator once
refused stays refused, so every run from the second on refuses, whatever the threads' order. A re-seed in
the caller between runs is no change in a run: every replica starts from it.

Between runs each other replica keeps its copy's state (``carried``), as each rank keeps its generator:
where the object stands where the last run left it, each continues its own (replicas that drew different
counts stay apart); where the caller drew from it since, each advances by as many draws
(``generator_steps``, CPU generators); otherwise (a re-seed in the caller) each starts from the object.
"""

from __future__ import annotations

from typing import Any

import torch

from multidev.placement.generator_steps import advanced, draws_between

_UNKNOWN = object()


class ProgramGenerators:
    """The program's generators of a strategy's runs: id -> [generator, state at the run's first draw,
    state after the last draw on the object itself (None before one), draws the caller made from it since
    the last run left it (None: a re-seed; computed when a replica first needs it), the replicas that drew
    from it, whether something other than its draws changed it]. Only a generator several replicas draw
    from is refused: one a replica made in the step is its own, and its re-seeds are its rank's."""

    def __init__(self):
        self.runs: dict[int, list] = {}
        self._left: dict[int, tuple] = {}   # the last run's generators: id -> (generator, state at its end)
        # The last run's generators several replicas drew from: id -> (generator, state at this run's start).
        self._starts: dict[int, tuple] = {}
        self._refused: dict[int, torch.Generator] = {}

    def fork(self) -> None:
        """At a run's start (caller thread): note where the last run's generators stand now."""
        self._starts = {key: (entry[0], entry[0].get_state()) for key, entry in self.runs.items() if len(entry[4]) > 1}
        self.runs.clear()

    def entry(self, generator: torch.Generator) -> list:
        """This run's record of ``generator`` (made at its first draw); under the replicas' lock."""
        key = id(generator)
        entry = self.runs.get(key)
        if entry is None:
            state = generator.get_state()
            start = self._starts.get(key)
            entry = self.runs[key] = [generator, state, None, _UNKNOWN, set(), False]
            if start is not None and start[0] is generator and not torch.equal(state, start[1]):
                self._refused[key] = generator
        if self._refused.get(key) is generator:
            raise _changed_in_step(generator)
        return entry

    def draw_on_object(self, entry: list, drawer: Any, func, args: tuple, kwargs: dict):
        """``func`` on the object itself (the first replica; ``drawer`` None: a ``merge_call``), refused
        where its state is not the one the last such draw (or the run's first draw) left and another
        replica draws from it too."""
        expected = entry[1] if entry[2] is None else entry[2]
        self.note(entry, drawer, not torch.equal(entry[0].get_state(), expected))
        result = func(*args, **kwargs)
        entry[2] = entry[0].get_state()
        return result

    def note(self, entry: list, drawer: Any, changed: bool) -> None:
        """Count ``drawer`` among ``entry``'s replicas; refuse a generator changed in the run once two draw."""
        if drawer is not None:
            entry[4].add(drawer)
        entry[5] = entry[5] or changed
        if entry[5] and len(entry[4]) > 1:
            self._refused[id(entry[0])] = entry[0]
            raise _changed_in_step(entry[0])

    def changed_after_first(self, entry: list) -> bool:
        """Whether the object's state is not the one the first replica's last draw left (a non-first
        replica's check: only once the first has drawn; before, the object moves only by re-seeds)."""
        return entry[2] is not None and not torch.equal(entry[0].get_state(), entry[2])


    def start(self, entry: list, carried: torch.Tensor | None) -> torch.Tensor:
        """A non-first replica's state of ``entry``'s generator at this run's start: its own from the last
        run (``carried``), advanced by the caller's draws since, or the object's."""
        if carried is None:
            return entry[1]
        if entry[3] is _UNKNOWN:
            entry[3] = self._caller_draws(entry)
        if entry[3] is None:
            return entry[1]
        return carried if entry[3] == 0 else advanced(carried, entry[3])

    def _caller_draws(self, entry: list) -> int | None:
        left = self._left.get(id(entry[0]))
        if left is None or left[0] is not entry[0]:
            return None
        if torch.equal(entry[1], left[1]):
            return 0
        return draws_between(left[1], entry[1]) if entry[0].device.type == "cpu" else None

    def join(self, streams: list) -> None:
        """At a run's end (caller thread): a generator whose state is not the one the first replica's last
        draw left was changed after it in the run (refused from the next run on); each stream of the other
        replicas keeps its state of every generator the run drew from (``carried``)."""
        for key, (generator, _, last, _, drawers, _) in self.runs.items():
            if last is not None and len(drawers) > 1 and not torch.equal(generator.get_state(), last):
                self._refused[key] = generator
        for stream in streams:
            stream.carried = {key: copy.get_state() if (copy := stream.copies.get(key)) is not None
                              else self.start(entry, stream.carried.get(key)) for key, entry in self.runs.items()}
        self._left = {key: (entry[0], entry[0].get_state()) for key, entry in self.runs.items()}


def _changed_in_step(generator: torch.Generator) -> ValueError:
    return ValueError(
        f"A torch.Generator passed as generator= (on {generator.device}) was re-seeded or had its state set "
        "(g.manual_seed / g.set_state / g.seed) inside the step of strategy.run while the replicas draw from it. "
        "Each DDP rank holds its own generator; replica threads share this one object, and torch's Generator "
        "methods cannot act on the calling replica's copy, so the replicas would draw other numbers than DDP's "
        "ranks. Make the generator inside the step (g = torch.Generator().manual_seed(seed): each replica then "
        "holds its own, as each rank does), or re-seed it outside strategy.run (every replica starts from it).")


__all__ = ["ProgramGenerators"]
