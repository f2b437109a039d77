"""Keras 3 models, layers and optimizers in ``md.train.Checkpoint`` / ``CheckpointManager``.

A Keras 3 layer is a ``torch.nn.Module``, but its ``state_dict`` names carry auto-generated layer
paths (``sequential_1/dense_1/kernel``), so a second model of the same program would not match.
Here a model's or layer's ``weights`` and an optimizer's ``variables`` are saved **by position**
(Keras's own ``.weights.h5`` stores an optimizer's the same way), each through the variable's
tensor (``variable._value``: a distributed variable on a strategy, written from its canonical copy,
restored into every copy), so a checkpoint written on N replicas restores on one device and back.
Registered with ``trackables.register_tensor_source`` when multidev is imported; keras is only looked
up in ``sys.modules``.
"""

from __future__ import annotations

import sys
from typing import Any


def accepts(obj: Any) -> bool:
    """Whether ``obj`` is a Keras 3 layer/model or optimizer (keras 3 imported, on torch)."""
    keras = sys.modules.get("keras")
    if keras is None or not str(getattr(keras, "__version__", "")).startswith("3.") or \
            keras.backend.backend() != "torch":
        return False
    return isinstance(obj, (keras.layers.Layer, keras.optimizers.Optimizer))


def tensors(obj: Any) -> dict:
    """``{position: tensor}`` of ``obj``'s weights (a layer) or variables (an optimizer)."""
    variables = obj.variables if isinstance(obj, sys.modules["keras"].optimizers.Optimizer) else obj.weights
    return {str(i): v._value for i, v in enumerate(variables)}
