"""Keras's ``use_ema``: an exponential moving average of the trained variables, kept by the optimizer.

After every update ``average = m * average + (1 - m) * variable`` (``m = ema_momentum``, 0 on the
first step, so the average starts at the variable); every ``ema_overwrite_frequency`` steps the
variables take their averages, and ``finalize_variable_values`` (called at the end of ``fit``) does
the same, as in Keras 3. Kept for plain variables or one replica; under several replicas it raises.

Example:
    opt = md.keras.optimizers.Adam(0.01, use_ema=True, ema_momentum=0.9)
"""

from __future__ import annotations

import numpy as np
import torch


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
        """After the update of step ``iteration`` (0-based, before it is counted)."""
        m = np.float32(self.momentum if iteration != 0 else 0.0)     # Keras's float32 scalars
        momentum, rest = float(m), float(np.float32(1) - m)
        for v in variables:
            t = v.detach()
            avg = self._averages.get(id(v))
            if avg is None:
                avg = self._averages[id(v)] = torch.zeros_like(t)
            avg.mul_(momentum).add_(t * rest)      # Keras: m * avg + (1 - m) * var
        if self.overwrite_frequency and (iteration + 1) % self.overwrite_frequency == 0:
            self.overwrite(variables)

    @torch.no_grad()
    def overwrite(self, variables: list) -> None:
        """Give each variable its average (those never updated keep their value)."""
        for v in variables:
            avg = self._averages.get(id(v))
            if avg is not None:
                v.copy_(avg)

    def averages(self) -> list:
        return list(self._averages.values())
