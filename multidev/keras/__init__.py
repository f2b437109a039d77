"""``md.keras``: the Keras API (models, layers, optimizers, losses, metrics, callbacks, ...) on PyTorch.

Layers are ``torch.nn.Module``s, tensors are ``torch.Tensor``s. ``from multidev.keras import *``
brings the submodule names into scope as ``from tensorflow.keras import *`` does.

Example:
    from multidev.keras import *
    model = models.Sequential([layers.Dense(10, activation="softmax", input_shape=(4,))])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
"""

from multidev.keras._missing import missing_names
from multidev.keras import (activations, backend, callbacks, datasets, initializers, layers, losses, metrics,
                            mixed_precision, models, ops, optimizers, preprocessing, random, regularizers, saving,
                            utils)
from multidev.keras.layers import Input
from multidev.keras.models import Model, Sequential
from multidev.keras.variables import Variable   # Keras 3's keras.Variable (not in __all__: tf.keras has none)

__all__ = ["models", "layers", "optimizers", "losses", "metrics", "callbacks", "datasets", "preprocessing", "utils",
           "mixed_precision", "ops", "random", "activations", "initializers", "regularizers", "backend", "saving", "Model", "Sequential", "Input"]

__getattr__ = missing_names(__name__, '', globals())  # unknown names: does Keras 3 have them?
for _module, _namespace in ((optimizers, "optimizers"), (optimizers.schedules, "optimizers.schedules")):
    _module.__getattr__ = missing_names(_module.__name__, _namespace, vars(_module))
del _module, _namespace
optimizers.LossScaleOptimizer = mixed_precision.LossScaleOptimizer   # Keras 3's place for it (it wraps these)

# ----- ops on functional KerasTensors build graph nodes (keras/layers/symbolic_ops.py) -----
from multidev.keras.layers import symbolic_ops as _symbolic_ops  # noqa: E402
_symbolic_ops.install()
