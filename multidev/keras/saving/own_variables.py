"""``save_own_variables``/``load_own_variables`` in ``model.save``/``load_model``, as Keras 3 calls them.

Every weight is saved and read by its module path; a layer whose class overrides either hook also gets its own
store, saved as ``__own_variables__/<layer path>/<key>`` beside the weights, and its ``load_own_variables`` runs
after the weights were read by path, so what the hook assigns (keras.io's customizing-saving guide: an extra
``keras.Variable`` and the Dense kernel and bias) is what the layer keeps. Values are arrays, never pickles.
"""

from __future__ import annotations

import numpy as np
import torch

PREFIX = "__own_variables__/"


def _hooked_layers(model) -> list:
    """``(path, layer)`` of the layers whose class overrides a variables hook (the model itself is ``""``)."""
    from multidev.keras.layers.base import Layer
    return [(path, layer) for path, layer in model.named_modules() if isinstance(layer, Layer) and (
        type(layer).save_own_variables is not Layer.save_own_variables
        or type(layer).load_own_variables is not Layer.load_own_variables)]


def stores(model) -> dict:
    """``{PREFIX + path/key: tensor}`` of what each hooked layer's ``save_own_variables`` stores."""
    out = {}
    for path, layer in _hooked_layers(model):
        store: dict = {}
        layer.save_own_variables(store)
        for key, value in store.items():
            value = value.detach().cpu() if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value))
            out[f"{PREFIX}{path}/{key}"] = value.contiguous()
    return out


def split(tensors: dict) -> tuple[dict, dict]:
    """(the weights by path, the hooks' entries) of a saved file's tensors."""
    own = {k: v for k, v in tensors.items() if k.startswith(PREFIX)}
    return {k: v for k, v in tensors.items() if k not in own}, own


def load(model, own: dict) -> None:
    """Run each hooked layer's ``load_own_variables`` with the store it saved (numpy arrays)."""
    for path, layer in _hooked_layers(model):
        head = f"{PREFIX}{path}/"
        layer.load_own_variables({k[len(head):]: v.numpy() for k, v in own.items() if k.startswith(head)})
