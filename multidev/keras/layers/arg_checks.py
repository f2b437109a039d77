"""Layer constructor arguments that must be positive integers (units, filters, table sizes), checked
when the layer is built by the program, as Keras does: ``Conv2D(0, 3)`` or ``LSTM(0)`` fails at
its line with the value received, not later inside torch with a shape error."""

from __future__ import annotations

import numbers


def positive_int(name: str, value) -> int:
    """``value`` as a Python int (numpy integers included) if it is > 0; else Keras's ValueError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"Received an invalid value for argument `{name}`, expected a positive integer. "
                         f"Received: {name}={value!r}")
    return int(value)
