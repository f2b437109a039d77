"""The order in which ``md.Module`` lists ``variables`` and ``submodules``: ``tf.Module``'s.

TensorFlow walks a module's attributes sorted by name, yields what it finds there (a variable, or a
variable inside a list/tuple/dict, dict keys sorted), then walks each submodule it found, in that order,
depth first; an object found twice is listed once. torch's ``parameters()`` follows registration order,
so a module holding ``self.w`` then ``self.b`` listed ``[w, b]`` where TensorFlow lists ``[b, w]``, and a
program that pairs ``trainable_variables`` with a list it made in TF's order paired the wrong ones.
"""

from __future__ import annotations

from typing import Any, Iterator

import torch

#: torch's own bookkeeping attributes (dicts of parameters, hooks, ...): walked through the three
#: registries below instead, never as attributes.
_TORCH_INTERNALS = frozenset(vars(torch.nn.Module()))


def _attributes(module: torch.nn.Module) -> dict:
    """The module's attributes by name: its plain ones and what torch registered (parameters, buffers,
    submodules). Buffers are marked, since a plain tensor attribute is no variable."""
    out = {k: v for k, v in vars(module).items() if k not in _TORCH_INTERNALS}
    out.update(module._parameters)
    out.update({k: _Buffer(v) for k, v in module._buffers.items() if v is not None})
    out.update(module._modules)
    return out


class _Buffer:
    """A registered buffer found in the walk (a variable of the module, as ``tf.Module`` lists them)."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor


def _leaves(value: Any, depth: int = 0) -> Iterator[Any]:
    """``value``'s leaves as ``tf.nest.flatten`` orders them (lists in order, dicts by sorted key)."""
    if depth > 100:
        return
    if isinstance(value, dict):
        try:
            keys = sorted(value)
        except TypeError:
            keys = list(value)
        for k in keys:
            yield from _leaves(value[k], depth + 1)
    elif isinstance(value, (list, tuple)) and not isinstance(value, torch.Tensor):
        for v in value:
            yield from _leaves(v, depth + 1)
    else:
        yield value


def walk(module: torch.nn.Module, want_modules: bool, seen: set | None = None,
         stack: frozenset = frozenset()) -> Iterator[Any]:
    """Variables (``want_modules=False``: parameters and buffers) or submodules of ``module``, in
    ``tf.Module``'s order."""
    seen = set() if seen is None else seen
    submodules = []
    attributes = _attributes(module)
    for key in sorted(attributes):
        for leaf in _leaves(attributes[key]):
            item = leaf.tensor if isinstance(leaf, _Buffer) else leaf
            if id(item) in seen:
                continue
            seen.add(id(item))
            if isinstance(item, torch.nn.Module):
                if want_modules:
                    yield item
                if id(item) not in stack:
                    submodules.append(item)
            elif not want_modules and (isinstance(item, torch.nn.Parameter) or isinstance(leaf, _Buffer)):
                yield item
    for sub in submodules:
        yield from walk(sub, want_modules, seen, stack | {id(module)})
