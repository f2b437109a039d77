"""Keras 3 variables as ``md.GradientTape`` sources: keras.io programs typed with ``tf.GradientTape`` ->
``md.GradientTape`` (the trainer pattern's ``train_step``: ``tape.gradient(loss, self.trainable_variables)``,
then ``self.optimizer.apply_gradients``) run on Keras 3's torch backend, on one device and on replicas.

A Keras 3 ``Variable`` on torch is no tensor; its forward reads ``variable._value`` (a ``torch.nn.Parameter``,
or under a mirrored strategy multidev's distributed variable, whose calling replica's copy the tape takes).
The gradients are each replica's own, as Keras 3's ``optimizer.apply`` expects here (it sums them).
"""

from __future__ import annotations

import sys
from typing import Any


def accepts(obj: Any) -> bool:
    """Whether ``obj`` is a Keras 3 variable on the torch backend."""
    keras = sys.modules.get("keras")
    if keras is None or not str(getattr(keras, "__version__", "")).startswith("3."):
        return False
    return isinstance(obj, keras.Variable) and keras.backend.backend() == "torch"


def tensor_of(variable: Any) -> Any:
    """The tensor the variable's forward reads (``_value``: the Parameter, or the distributed variable)."""
    return variable._value
