"""Whether this thread is inside a Keras layer's call: the one fact the layers and the ops share.

A layer's ``__call__`` (``layers/base.py``) keeps ``(training flag, depth)`` of the innermost enclosing layer
call here; ``md.keras.ops`` reads the depth to hand the program, outside every layer, results it can read
with ``.numpy()`` (TensorFlow's eager tensors), and nothing more inside layers (the training hot path).
"""

from __future__ import annotations

import contextvars

#: (training flag, depth) of the innermost enclosing layer call; each thread starts outside every call.
call_state: contextvars.ContextVar[tuple] = contextvars.ContextVar("multidev_layer_call", default=(None, 0))


def outside_layers() -> bool:
    """True outside every layer call (a program's own code, a model's ``train_step``)."""
    return call_state.get()[1] == 0
