"""``md.keras.saving``: weights files (safetensors), whole-model save/load (JSON + safetensors), serialization."""

from multidev.keras._missing import missing_names
from multidev.keras.saving.model_io import load_model, save_model
from multidev.keras.saving.serialization import (custom_object_scope, deserialize_keras_object, deserialize_layer,
                                                 get_custom_objects, register_keras_serializable, serialize_keras_object,
                                                 serialize_layer)
from multidev.keras.saving.weights_io import load_weights, save_weights

__all__ = ["load_model", "save_model", "save_weights", "load_weights", "serialize_layer", "deserialize_layer",
           "custom_object_scope", "get_custom_objects", "register_keras_serializable", "serialize_keras_object",
           "deserialize_keras_object"]

__getattr__ = missing_names(__name__, 'saving', globals())  # unknown names: does Keras 3 have them?
