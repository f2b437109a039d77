"""Keras's ``use_ema``: an exponential moving average of the trained variables, kept by the optimizer.

After every update ``average = m * average + (1 - m) * variable`` (``m = ema_momentum``, 0 on the
first step, so the average starts at the variable); every ``ema_overwrite_frequency`` steps the
variables take their averages, and ``finalize_variable_values`` (called at the end of ``fit``) does
the same, as in Keras 3. Under a strategy every replica keeps the averages of its own copies (keyed by
replica): the copies are equal after each synchronous update, so the averages are too, and no replica
ever reads or writes another's (TensorFlow 2.21's MirroredStrategy gives one device's numbers as well).

Example:
    opt = md.keras.optimizers.Adam(0.01, use_ema=True, ema_momentum=0.9)
"""

from __future__ import annotations

import numpy as np
import torch

from multidev.values.context import current_replica_id
from multidev.values.variables import DistributedVariable, local_view


class MovingAverages:
    """The averages of an optimizer's variables (keyed by the variable's identity)."""

    def __init__(self, momentum: float, overwrite_frequency):
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"`ema_momentum` must be in the range [0, 1]. Received: ema_momentum={momentum!r}")
        if overwrite_frequency is not None and (not isinstance(overwrite_frequency, int) or overwrite_frequency < 1):
            raise ValueError("`ema_overwrite_frequency` must be an integer >= 1 or None. Received: "
                             f"ema_overwrite_frequency={overwrite_frequency!r}")
        self.momentum, self.overwrite_frequency = momentum, overwrite_frequency
        self._averages: dict[int, torch.Tensor] = {}

    @torch.no_grad()
    def update(self, variables: list, iteration: int) -> None:
        """After the update of step ``iteration`` (0-based, before it is counted), on the calling replica's
        copies (a plain variable: by replica 0, or without a strategy)."""
        m = np.float32(self.momentum if iteration != 0 else 0.0)     # Keras's float32 scalars
        momentum, rest = float(m), float(np.float32(1) - m)
        replica = current_replica_id()
        for v in variables:
            key = _key(v, replica)
            if key is None:
                continue
            t = local_view(v).detach()
            avg = self._averages.get(key)
            if avg is None:
                avg = self._averages[key] = torch.zeros_like(t)
            avg.mul_(momentum).add_(t * rest)      # Keras: m * avg + (1 - m) * var
        if self.overwrite_frequency and (iteration + 1) % self.overwrite_frequency == 0:
            self.overwrite(variables)

    @torch.no_grad()
    def overwrite(self, variables: list) -> None:
        """Give each variable its average (those never updated keep their value): in a replica, its own
        copies; in cross-replica context (the end of ``fit``), every copy its replica's average."""
        replica = current_replica_id()
        for v in variables:
            if replica is None and isinstance(v, DistributedVariable):
                for r in range(len(v.values)):
                    avg = self._averages.get((r, id(v)))
                    if avg is not None:
                        v.assign_component(r, avg)
                continue
            avg = self._averages.get(_key(v, replica) or (None, id(v)))
            if avg is None:
                continue
            if isinstance(v, DistributedVariable):
                v.assign_component(replica, avg)
            else:
                v.copy_(avg)

    def averages(self) -> list:
        return list(self._averages.values())


def _key(variable, replica):
    """Whose average of ``variable`` the calling replica keeps: a distributed variable's, one per replica; a
    plain one's, one (replica 0 or no strategy keeps it; None for the other replicas)."""
    if isinstance(variable, DistributedVariable):
        return (replica, id(variable))
    return (None, id(variable)) if replica in (None, 0) else None
