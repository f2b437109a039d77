"""Checking ``fit``'s counting arguments before anything runs: numpy integers are integers (as
everywhere an int is taken), and a wrong type or range raises TensorFlow's exception type naming
the argument, the value received and what is valid."""

from __future__ import annotations

import numbers


def as_int(name: str, value, *, minimum: int, allow_none: bool = False, whole_floats: bool = False) -> int | None:
    """``value`` as a Python int (numpy integers included, bool refused) at least ``minimum``; with
    ``whole_floats`` a float holding a whole number too (tf.keras 2 takes the imbalanced_data tutorial's
    ``steps_per_epoch=np.ceil(2.0*neg/BATCH_SIZE)``; another float is refused: tf.keras 2 would run its
    ceiling, Keras 3 refuses every float)."""
    if value is None and allow_none:
        return None
    if whole_floats and isinstance(value, numbers.Real) and not isinstance(value, (bool, numbers.Integral)):
        if not float(value).is_integer():
            raise TypeError(f"`{name}` must be an integer or None. Received: {name}={value!r} (type "
                            f"{type(value).__name__}), not a whole number: pass int(np.ceil({name})) for the "
                            f"steps tf.keras 2 would run.")
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an integer{' or None' if allow_none else ''}. Received: {name}={value!r} "
                        f"(type {type(value).__name__}).")
    if value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}. Received: {name}={value!r}.")
    return int(value)


def validation_split(value) -> float:
    """A fraction in [0, 1) (numpy floats and ints included)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"`validation_split` must be a float in [0, 1). Received: validation_split={value!r} "
                        f"(type {type(value).__name__}).")
    if not 0.0 <= float(value) < 1.0:
        raise ValueError(f"`validation_split` must be in [0, 1). Received: validation_split={value!r}.")
    return float(value)


def validation_freq(value) -> int | list[int]:
    """A positive int (validate every N epochs) or a collection of 1-based epoch numbers."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return as_int("validation_freq", value, minimum=1)
    try:
        return [as_int("validation_freq", v, minimum=1) for v in value]
    except TypeError:
        raise TypeError(f"`validation_freq` must be a positive int or a list of epochs. Received: "
                        f"validation_freq={value!r}.") from None


def check_fit(epochs, initial_epoch, steps_per_epoch, validation_steps, split, freq) -> tuple:
    """All of ``fit``'s counting arguments, normalised; raises before any state changes."""
    return (as_int("epochs", epochs, minimum=0), as_int("initial_epoch", initial_epoch, minimum=0),
            as_int("steps_per_epoch", steps_per_epoch, minimum=1, allow_none=True, whole_floats=True),
            as_int("validation_steps", validation_steps, minimum=1, allow_none=True, whole_floats=True),
            validation_split(split), validation_freq(freq))


#: tf.keras 2's input-loading knobs of fit/evaluate/predict: how many threads or processes fetch a Sequence's
#: or generator's batches, and how many wait in the queue. md takes them and loads in order on its own thread,
#: as tf.keras 2 with workers=1 (with more, its enqueuer thread also calls a Sequence's on_epoch_end, as often
#: as its timing gives; Keras 3 moved the knobs to PyDataset).
KERAS2_LOADING = ("max_queue_size", "workers", "use_multiprocessing")


def check_no_other(method: str, kwargs: dict) -> None:
    """Refuse keyword arguments ``method`` does not take, but Keras 2's loading knobs."""
    unknown = sorted(k for k in kwargs if k not in KERAS2_LOADING)
    if unknown:
        raise TypeError(f"Invalid keyword argument(s) in `{method}()`: {unknown!r}.")
