"""A layer's list attribute holding layers among other values, tracked as Keras tracks it.

Keras (3 and tf.keras 2) tracks every layer inside a list attribute, whatever else the list holds: keras.io's
Forward-Forward network keeps ``self.layer_list = [keras.Input(shape=(784,))]`` and adds its ``FFDense`` layers
with ``self.layer_list += [FFDense(...)]``; ``train_step`` walks ``self.layers``. torch registers only a list of
modules alone (``nn.ModuleList``: ``base.py`` makes those one), so such a list was a plain attribute: ``layers``
was empty, the weights were no model weights, and the step trained nothing, silently. Here the program keeps its
list (a ``TrackedList``, still a ``list``; an empty list too, as ``self.blocks = []`` before its ``append``s of
layers, which went untracked alike), and its layers are registered beside it as an ``nn.ModuleList`` under
``<name>_tracked`` (what ``layers``, ``weights`` and a strategy's scope see), kept current through the list's
mutators (``append``, ``+=``, ``extend``, ``insert``, item writes, removals).
"""

from __future__ import annotations

from typing import Any

from torch import nn

SUFFIX = "_tracked"


def holds_some_layers(value: Any) -> bool:
    """A list or tuple with at least one module among other values (all modules: ``nn.ModuleList``'s case)."""
    return isinstance(value, (list, tuple)) and any(isinstance(v, nn.Module) for v in value)


def track(owner: nn.Module, name: str, value: Any) -> Any:
    """What ``owner.<name> = value`` stores: a ``TrackedList`` (a tuple as it is) with its layers registered;
    any other value drops the layers a former list under that name registered."""
    if isinstance(value, list) and not value and type(value) is list:   # self.blocks = [] before its appends
        return TrackedList(value, owner, name)
    if holds_some_layers(value):
        if isinstance(value, list):
            return TrackedList(value, owner, name)
        _register(owner, name, value)
        return value
    if name + SUFFIX in owner.__dict__.get("_modules", {}):
        del owner._modules[name + SUFFIX]
    return value


def _register(owner: nn.Module, name: str, items) -> None:
    modules = [v for v in items if isinstance(v, nn.Module)]
    if modules:
        owner.add_module(name + SUFFIX, nn.ModuleList(modules))
    elif name + SUFFIX in owner._modules:
        del owner._modules[name + SUFFIX]


class TrackedList(list):
    """A list attribute whose layers stay registered on its owner (see the module docstring)."""

    def __init__(self, items, owner: nn.Module, name: str):
        super().__init__(items)
        self._owner, self._name = owner, name
        self._sync()

    def _sync(self) -> None:
        _register(self._owner, self._name, self)

    def __reduce_ex__(self, protocol):   # pickled (torch.save of a model) as the plain list it stands for
        return list, (list(self),)

    def __iadd__(self, other):
        super().__iadd__(other)
        self._sync()
        return self


def _synced(method_name: str):
    method = getattr(list, method_name)

    def synced(self, *args, **kwargs):
        result = method(self, *args, **kwargs)
        self._sync()
        return result

    synced.__name__ = method_name
    return synced


for _name in ("append", "extend", "insert", "pop", "remove", "clear", "__setitem__", "__delitem__"):
    setattr(TrackedList, _name, _synced(_name))
