"""Sublayers assigned before ``super().__init__()``, as Keras allows and keras.io's examples do.

keras.io's switch transformer writes ``self.route = layers.Dense(...)`` and then calls ``super().__init__()``
(TensorFlow's Keras tracks attributes from ``__new__``). A ``torch.nn.Module`` refuses that ("cannot assign
module before Module.__init__() call"), so the layer's torch state is started at the first such assignment and
``Layer.__init__`` keeps what was registered in it when torch's ``__init__`` starts it again.
"""

from __future__ import annotations

from torch import nn

_TORCH_STATE = ("_parameters", "_buffers", "_modules")


def start_torch_state(layer, value) -> None:
    """Start ``layer``'s torch state if ``value`` (a module or parameter) is assigned before ``__init__``."""
    if "_modules" not in layer.__dict__ and isinstance(value, (nn.Module, nn.Parameter)):
        nn.Module.__init__(layer)


def registered_early(layer) -> dict:
    """The sublayers and weights registered before ``__init__`` (empty for a layer that calls it first)."""
    return {key: dict(layer.__dict__[key]) for key in _TORCH_STATE if layer.__dict__.get(key)}


def restore(layer, early: dict) -> None:
    """Register again what ``registered_early`` kept, after torch's ``__init__`` emptied the dicts."""
    for key, entries in early.items():
        layer.__dict__[key].update(entries)
