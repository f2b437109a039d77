"""``StateVariable``: Keras 3's Variable API (``assign``, ``assign_add``, ``value``) over a metric's state.

A Keras 3 metric keeps the object ``add_variable`` returns (``self.total = self.add_variable(...)``)
and updates it with ``self.total.assign_add(x)``. md.keras keeps one state per replica while a step
runs, so the object must not be the tensor: it is a handle that finds the running replica's tensor
each time it is used (``getter``), and behaves as that tensor in arithmetic and torch calls.

Example:
    self.total = self.add_variable(shape=(), initializer="zeros", name="total")
    self.total.assign_add(ops.sum(values))
    return self.total.value
"""

from __future__ import annotations

import operator

import torch


class StateVariable:
    """A named state read through ``getter()`` (the current replica's tensor), updated in place."""

    def __init__(self, name: str, getter):
        self.name, self._getter = name, getter

    @property
    def value(self) -> torch.Tensor:
        """The current tensor (the running replica's while a step runs)."""
        return self._getter()

    def assign(self, value):
        """Overwrite the state with ``value`` (broadcast to its shape)."""
        target = self.value
        with torch.no_grad():
            target.copy_(torch.as_tensor(_unwrap(value), dtype=target.dtype, device=target.device))
        return self

    def assign_add(self, value):
        """Add ``value`` to the state in place."""
        target = self.value
        with torch.no_grad():
            target.add_(torch.as_tensor(_unwrap(value), device=target.device).to(target.dtype))
        return self

    def assign_sub(self, value):
        """Subtract ``value`` from the state in place."""
        target = self.value
        with torch.no_grad():
            target.sub_(torch.as_tensor(_unwrap(value), device=target.device).to(target.dtype))
        return self

    def numpy(self):
        return self.value.detach().cpu().numpy()

    def __array__(self, dtype=None, copy=None):
        array = self.numpy()
        return array if dtype is None else array.astype(dtype)

    shape = property(lambda self: self.value.shape)
    dtype = property(lambda self: self.value.dtype)
    __float__ = lambda self: float(self.value)  # noqa: E731
    __int__ = lambda self: int(self.value)  # noqa: E731
    __bool__ = lambda self: bool(self.value)  # noqa: E731

    def __repr__(self):
        return f"<StateVariable {self.name!r} value={self.value!r}>"

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return func(*_unwrap(args), **_unwrap(kwargs or {}))


def _unwrap(value):
    """``value`` with every StateVariable (also inside lists, tuples, dicts) replaced by its tensor."""
    if isinstance(value, StateVariable):
        return value.value
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v) for v in value)
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    return value


def _binary(op, reflected=False):
    def method(self, other):
        a, b = self.value, _unwrap(other)
        return op(b, a) if reflected else op(a, b)
    return method


for _name, _op in [("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("truediv", operator.truediv), ("floordiv", operator.floordiv), ("pow", operator.pow),
                   ("mod", operator.mod), ("matmul", operator.matmul)]:
    setattr(StateVariable, f"__{_name}__", _binary(_op))
    setattr(StateVariable, f"__r{_name}__", _binary(_op, reflected=True))
for _name, _op in [("lt", operator.lt), ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge)]:
    setattr(StateVariable, f"__{_name}__", _binary(_op))
StateVariable.__neg__ = lambda self: -self.value
StateVariable.__getitem__ = lambda self, index: self.value[index]
