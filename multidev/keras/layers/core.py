"""Core layers: Dense, Activation, Dropout, Flatten, Reshape, Embedding.

Example:
    layer = md.keras.layers.Dense(10, activation="relu")
    y = layer(torch.ones(4, 3))      # builds a (3, 10) kernel on first call
"""

from __future__ import annotations

import numbers

import math

import torch
import torch.nn.functional as F

from multidev.keras import activations, batch_draw, initializers, regularizers
from multidev.keras.layers.base import Layer
from multidev.keras.layers.input_spec import InputSpec
from multidev.keras.layers.arg_checks import positive_int


class Dense(Layer):
    """``activation(inputs @ kernel + bias)`` over the last axis; kernel is (in, units)."""

    supports_masking = True

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, **kwargs):
        super().__init__(**kwargs)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        if isinstance(units, bool) or not isinstance(units, numbers.Integral) or units <= 0:
            raise ValueError(f"Received an invalid value for `units`, expected a positive integer. Received: units={units!r}")
        self.units = int(units)     # Keras 2 takes numpy integers (seed 002: Dense(y_train.max() + 1))
        self.activation = activations.get(activation)
        self.use_bias = use_bias
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.input_spec = InputSpec(min_ndim=2)

    def build(self, input_shape):
        last = input_shape[-1]
        self.add_weight("kernel", (last, self.units), self.kernel_initializer, regularizer=self.kernel_regularizer)
        if self.use_bias:
            self.add_weight("bias", (self.units,), self.bias_initializer, regularizer=self.bias_regularizer)
        self.input_spec = InputSpec(min_ndim=2, axes={-1: last})

    def call(self, inputs):
        x = inputs if inputs.is_floating_point() else inputs.float()
        out = F.linear(x, self.kernel.t(), self.bias if self.use_bias else None)
        return self.activation(out)

    def _saved_weights(self) -> list:
        """Keras 3's Dense stores its kernel and bias as "0" and "1", not a subclass's other variables."""
        return ([self.kernel] + ([self.bias] if self.use_bias else [])) if self.built else []

    def get_config(self):
        return {**super().get_config(), "units": self.units, "activation": activations.serialize(self.activation),
                "use_bias": self.use_bias, "kernel_initializer": initializers.serialize(self.kernel_initializer),
                "bias_initializer": initializers.serialize(self.bias_initializer),
                "kernel_regularizer": regularizers.serialize(self.kernel_regularizer),
                "bias_regularizer": regularizers.serialize(self.bias_regularizer)}


class Identity(Layer):
    """Returns its inputs unchanged (Keras 3's ``layers.Identity``: a placeholder, e.g. for a normalization left out)."""

    supports_masking = True

    def call(self, inputs):
        return inputs


class Activation(Layer):
    """Applies an activation function by name or callable."""

    supports_masking = True

    def __init__(self, activation, **kwargs):
        super().__init__(**kwargs)
        self.activation = activations.get(activation)

    def call(self, inputs):
        return self.activation(inputs)

    def get_config(self):
        return {**super().get_config(), "activation": activations.serialize(self.activation)}


class Dropout(Layer):
    """Zeroes a ``rate`` fraction of inputs while training (scaled by 1/(1-rate)); identity otherwise."""

    supports_masking = True

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(rate, bool) or not isinstance(rate, numbers.Real):
            raise TypeError(f"Invalid value received for argument `rate`. Expected a float value between 0 and 1. "
                            f"Received: rate={rate!r} (type {type(rate).__name__})")
        if not 0 <= rate <= 1:
            raise ValueError(f"Invalid value received for argument `rate`. Expected a float value between 0 and 1. Received: rate={rate!r}")
        self.rate, self.noise_shape, self.seed = rate, noise_shape, seed

    def call(self, inputs, training=False):
        # On replicas in fit: the rows of one device's mask for the global batch (not one mask per replica)
        return batch_draw.dropout(inputs, self.rate, training)

    def get_config(self):
        return {**super().get_config(), "rate": self.rate, "noise_shape": self.noise_shape, "seed": self.seed}


class Flatten(Layer):
    """Flattens all but the batch axis."""

    def call(self, inputs):   # (no -1: an empty slice of a small last batch on replicas has 0 rows)
        return inputs.reshape(inputs.shape[0], math.prod(inputs.shape[1:]))


class Reshape(Layer):
    """Reshapes to ``(batch,) + target_shape``; one entry may be -1."""

    def __init__(self, target_shape, **kwargs):
        super().__init__(**kwargs)
        self.target_shape = tuple(target_shape)

    def build(self, input_shape):
        total = math.prod(input_shape[1:])
        known = math.prod(d for d in self.target_shape if d != -1)
        ok = total % known == 0 if -1 in self.target_shape else total == known
        if not ok:
            raise ValueError(
                f"total size of new array must be unchanged, input_shape = {list(input_shape[1:])}, "
                f"output_shape = {list(self.target_shape)}"
            )

    def call(self, inputs):
        return inputs.reshape((inputs.shape[0],) + self.target_shape)

    def get_config(self):
        return {**super().get_config(), "target_shape": list(self.target_shape)}


class Embedding(Layer):
    """Maps integer ids in [0, input_dim) to rows of an (input_dim, output_dim) table."""

    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform", mask_zero=False,
                 input_length=None, embeddings_regularizer=None, **kwargs):
        if input_length is not None and "input_shape" not in kwargs and "batch_input_shape" not in kwargs:
            kwargs["input_shape"] = (input_length,)   # deprecated Keras 2 argument: fixes the input length
        super().__init__(**kwargs)
        self.input_dim, self.output_dim = positive_int("input_dim", input_dim), positive_int("output_dim", output_dim)
        self.mask_zero = mask_zero
        self.input_length = input_length
        self.embeddings_initializer = initializers.get(embeddings_initializer)
        self.embeddings_regularizer = regularizers.get(embeddings_regularizer)

    def build(self, input_shape):
        self.add_weight("embeddings", (self.input_dim, self.output_dim), self.embeddings_initializer,
                        regularizer=self.embeddings_regularizer)

    def compute_mask(self, inputs, mask=None):
        """``inputs != 0`` when ``mask_zero`` (id 0 is padding), else no mask."""
        return torch.ne(torch.as_tensor(inputs), 0) if self.mask_zero else None

    def call(self, inputs):
        ids = inputs if inputs.dtype in (torch.int64, torch.int32) else inputs.long()
        # A device-side check would cost a sync per step; a traced program (torch.export) has no values.
        if ids.device.type == "cpu" and ids.numel() and not torch.compiler.is_compiling():
            lo, hi = torch.aminmax(ids)
            if int(lo) < 0 or int(hi) >= self.input_dim:
                bad = int(hi) if int(hi) >= self.input_dim else int(lo)
                raise ValueError(
                    f'Layer "{self.name}": input id {bad} is out of range for Embedding(input_dim={self.input_dim}); '
                    f"valid ids are 0..{self.input_dim - 1}. Increase input_dim or clip the ids."
                )
        return F.embedding(ids, self.embeddings)

    def get_config(self):
        return {**super().get_config(), "input_dim": self.input_dim, "output_dim": self.output_dim,
                "embeddings_initializer": initializers.serialize(self.embeddings_initializer),
                "mask_zero": self.mask_zero, "input_length": self.input_length,
                "embeddings_regularizer": regularizers.serialize(self.embeddings_regularizer)}


class Lambda(Layer):
    """Wraps a function of the inputs as a layer. Its config names a function registered with
    ``register_keras_serializable`` (as Keras 3 writes it: keras.io's DDIM clones a network whose ``Lambda`` wraps
    its registered ``sinusoidal_embedding``); any other function stays in memory (saving it would need pickle)."""

    def __init__(self, function, output_shape=None, arguments=None, **kwargs):
        super().__init__(**kwargs)
        if not callable(function):
            raise TypeError(f"Lambda expects a callable, received {function!r}")
        self.function, self.arguments = function, dict(arguments or {})
        self._lambda_output_shape = output_shape

    def call(self, inputs):
        return self.function(inputs, **self.arguments)

    def get_config(self):
        from multidev.keras.saving import serialization   # (saving imports the layers)
        names = [k for k, v in serialization.get_custom_objects().items() if v is self.function]
        if not names:
            raise NotImplementedError(
                f'Lambda layer "{self.name}" wraps a Python function, which multidev does not serialize (that would '
                "need pickle). Register it with @keras.saving.register_keras_serializable(), write a small Layer "
                "subclass with get_config(), or save the weights with save_weights()."
            )
        name = next((k for k in names if ">" in k), names[0])
        return {**super().get_config(), "function": {"module": "builtins", "class_name": "function", "config": name,
                                                     "registered_name": "function"},
                "output_shape": self._lambda_output_shape, "arguments": self.arguments}

    @classmethod
    def from_config(cls, config):
        from multidev.keras.saving import serialization
        config = dict(config)
        function = config.pop("function")
        if isinstance(function, dict) and function.get("class_name") == "function":
            registered = serialization.get_custom_objects()
            if function["config"] not in registered:
                raise TypeError(f"Could not locate function {function['config']!r} of Lambda layer "
                                f"{config.get('name')!r}: register it with @keras.saving.register_keras_serializable().")
            function = registered[function["config"]]
        return cls(function, **config)
