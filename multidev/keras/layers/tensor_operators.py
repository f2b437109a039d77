"""Python operators on functional KerasTensors, as Keras 3's: each builds an op node
(``symbolic_ops``) of the md.keras.ops function Keras 3 uses (``a + b`` is ``ops.add``, ``a / b``
``ops.true_divide``, ``a[:, :2]`` ``get_item``). ``==`` and ``hash`` stay identity (tensors key dicts
and sets), ``!=`` is ``ops.not_equal``, as in Keras 3; ``bool(x)`` raises. A torch tensor on the left
(``pos_table + x``) gives the same op; other torch functions on KerasTensors (``torch.sin(x)``) build
nodes too, which run but cannot be saved.
"""

from __future__ import annotations

import functools


def _ops():
    from multidev.keras import ops
    return ops


def _binary(name, reflected=False):
    def method(self, other):
        op = getattr(_ops(), name)
        return op(other, self) if reflected else op(self, other)
    method.__name__ = f"__{'r' if reflected else ''}{name}__"
    method.__doc__ = f"``ops.{name}`` as a graph node."
    return method


def _unary(name):
    def method(self):
        return getattr(_ops(), name)(self)
    method.__doc__ = f"``ops.{name}`` as a graph node."
    return method


def get_item(x, key):
    """``x[key]`` (Keras 3's ``GetItem``)."""
    return x[key]


# torch.Tensor's methods that ``torch_tensor <op> keras_tensor`` calls -> the md.keras.ops function.
_TENSOR_METHODS = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "true_divide",
                   "__floordiv__": "floor_divide", "remainder": "mod", "pow": "power", "matmul": "matmul",
                   "lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal", "ne": "not_equal",
                   "__and__": "logical_and", "__or__": "logical_or"}


@functools.lru_cache(maxsize=1)
def _torch_operators() -> dict:
    """``{torch.Tensor.add: "add", ...}``: what torch dispatches ``t + x`` to when ``x`` is a KerasTensor."""
    import torch
    return {getattr(cls, method): op for cls in (torch.Tensor, torch._C.TensorBase)
            for method, op in _TENSOR_METHODS.items() if hasattr(cls, method)}


class TensorOperators:
    """Mixin of KerasTensor: the arithmetic, comparison and indexing operators as graph nodes."""

    __add__, __radd__ = _binary("add"), _binary("add", True)
    __sub__, __rsub__ = _binary("subtract"), _binary("subtract", True)
    __mul__, __rmul__ = _binary("multiply"), _binary("multiply", True)
    __truediv__, __rtruediv__ = _binary("true_divide"), _binary("true_divide", True)
    __floordiv__, __rfloordiv__ = _binary("floor_divide"), _binary("floor_divide", True)
    __mod__, __rmod__ = _binary("mod"), _binary("mod", True)
    __pow__, __rpow__ = _binary("power"), _binary("power", True)
    __matmul__, __rmatmul__ = _binary("matmul"), _binary("matmul", True)
    __lt__, __le__ = _binary("less"), _binary("less_equal")
    __gt__, __ge__ = _binary("greater"), _binary("greater_equal")
    __ne__ = _binary("not_equal")
    __and__, __rand__ = _binary("logical_and"), _binary("logical_and", True)
    __or__, __ror__ = _binary("logical_or"), _binary("logical_or", True)
    __neg__, __abs__, __invert__ = _unary("negative"), _unary("absolute"), _unary("logical_not")
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __getitem__(self, key):
        from multidev.keras.layers import symbolic_ops
        return symbolic_ops.symbolic_call(get_item, "keras.ops.get_item", (self, key), {})

    def __bool__(self):
        raise TypeError("A symbolic KerasTensor cannot be used as a boolean.")

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """A torch function on KerasTensors: an op node (unsaveable: torch functions have no saved name here)."""
        from multidev.keras.layers import symbolic_ops
        operator = _torch_operators().get(func)
        if operator is not None and len(args) == 2 and not kwargs:   # torch_tensor + keras_tensor: Keras 3's op
            return getattr(_ops(), operator)(*args)
        key = symbolic_ops.TORCH_KEYS.get(func)
        if key is not None:   # md.keras.activations.tanh is torch.tanh: Keras 3's node, saved by name
            return symbolic_ops.symbolic_call(func, key, args, kwargs or {})
        name = getattr(func, "__name__", type(func).__name__)
        return symbolic_ops.symbolic_call(func, None, args, kwargs or {}, display=("TFOpLambda", f"torch.{name}", True))
