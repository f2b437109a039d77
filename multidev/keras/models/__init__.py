"""``md.keras.models``: Model, Sequential, load_model, clone_model.

Example:
    model = md.keras.models.Sequential([md.keras.layers.Dense(1, input_shape=(4,))])
"""

from multidev.keras._missing import missing_names
from multidev.keras.models.functional import Functional
from multidev.keras.models.model import Model
from multidev.keras.models.sequential import Sequential
from multidev.keras.models.torch_model import TorchModel
from multidev.keras.saving.model_io import load_model, save_model


def clone_model(model, custom_objects=None):
    """A new model with the same architecture (fresh weights), from ``get_config``; a subclassed model
    through its own class (``type(model).from_config(model.get_config())``, as Keras 3 clones it)."""
    from multidev.keras.saving.serialization import deserialize_layer, serialize_layer
    if isinstance(model, Model) and not isinstance(model, (Sequential, Functional, TorchModel)):
        return type(model).from_config(model.get_config())
    return deserialize_layer(serialize_layer(model), custom_objects)


__all__ = ["Model", "Sequential", "Functional", "TorchModel", "load_model", "save_model", "clone_model"]

__getattr__ = missing_names(__name__, 'models', globals())  # unknown names: does Keras 3 have them?
