"""Keras 3's saving hooks for md.keras layers (a part of ``Layer``): ``get_build_config``/``build_from_config``
and ``save_own_variables``/``load_own_variables``.

``load_model`` builds a layer whose class overrides either build method before its weights are read (keras.io's
customizing saving guide: a ``build`` with an extra argument, built by hand before the model); md.keras rebuilds the
other layers by replaying their calls (``saving/serialization.py``). A layer whose class overrides either variables
hook gets its own store in ``model.save``/``load_model`` (``saving/own_variables.py``): what it puts there is saved,
and its ``load_own_variables`` runs after every weight was read by name, so what it assigns is what the layer keeps.
"""

from __future__ import annotations

import torch

from multidev.keras import backend


class SavingHooks:
    """The four methods, on ``Layer`` (which provides ``built``, ``_build_input_shape`` and ``_build_once``)."""

    def get_build_config(self):
        """Keras 3's: what ``build_from_config`` needs to build the layer again (the input shape it was built with)."""
        if not self.built or self._build_input_shape is None:
            return None
        return {"input_shape": _listed(self._build_input_shape)}

    def build_from_config(self, config):
        """Build from ``get_build_config()``: ``load_model`` calls it before reading the weights of a layer that
        overrides either (keras.io: a ``build`` with an extra argument, built by hand before the model)."""
        if config and config.get("input_shape") is not None:
            self._build_once(_tupled(config["input_shape"]))


    def save_own_variables(self, store):
        """Keras 3's default: this layer's own weights (not its sublayers'), trainable first, as ``store["0"]``,
        ``store["1"]``, ... (numpy arrays)."""
        for i, weight in enumerate(self._saved_weights()):
            store[f"{i}"] = weight.detach().cpu().numpy()

    def load_own_variables(self, store):
        """Keras 3's default: assign ``store["0"]``, ``store["1"]``, ... to this layer's own weights, in order.

        Raises:
            ValueError: the store holds another number of values than the layer has weights.
        """
        weights = self._saved_weights()
        if len(store) != len(weights):
            raise ValueError(f"Layer {self.name!r} expected {len(weights)} variables, but received {len(store)} "
                             f"variables during loading (keys {sorted(store)!r}). Expected: "
                             f"{[getattr(w, 'name', None) for w in weights]}")
        for i, weight in enumerate(weights):   # set_value: every replica's copy of a distributed weight
            backend.set_value(weight, torch.as_tensor(store[f"{i}"]).to(weight.device, weight.dtype))


    def _saved_weights(self) -> list:
        """What the default hooks store, in order (Dense: its kernel and bias only, as Keras 3's)."""
        return _own_weights(self)


def _own_weights(layer) -> list:
    """The layer's own weights (parameters and persistent buffers registered on it, not on a sublayer):
    trainable first, as Keras 3 lists them (BatchNormalization: gamma, beta, moving_mean, moving_variance)."""
    own = [p for p in layer._parameters.values() if p is not None]
    buffers = [b for n, b in layer._buffers.items() if b is not None and n not in layer._non_persistent_buffers_set]
    return [p for p in own if p.requires_grad] + [p for p in own if not p.requires_grad] + buffers


def _listed(shape):
    """A shape (or nested shapes) as JSON lists."""
    return [_listed(s) for s in shape] if isinstance(shape, (list, tuple)) else shape


def _tupled(shape):
    """A shape read back from JSON: a flat list is one shape (a tuple), a list of lists several."""
    if isinstance(shape, list) and any(isinstance(s, (list, tuple)) for s in shape):
        return [_tupled(s) for s in shape]
    return tuple(shape) if isinstance(shape, (list, tuple)) else shape
