"""``md.keras.ops`` element-wise and linear-algebra ops (the rest of ``keras.ops.numpy``) on torch.

Float-valued ops (``sqrt``, ``exp``, ``log``, ``divide``, ...) promote ints to floatx as Keras 3 does;
``square``, ``abs``, ``clip`` keep integer dtypes. Python scalars are weakly typed, as in Keras.

Example:
    ops.where(mask, ops.exp(x), ops.zeros_like(x))
"""

from __future__ import annotations

import torch

from multidev.keras.ops.core import convert_to_tensor
from multidev.keras.ops.numpy import _float

_t = convert_to_tensor


def _operand(x):
    """A tensor, or a Python scalar kept as is (torch types scalars weakly, as Keras does)."""
    return x if isinstance(x, (int, float, bool)) else _t(x)


def _unary_float(torch_fn, doc):
    def op(x):
        return torch_fn(_float(x))
    op.__doc__ = doc
    return op


def _unary(torch_fn, doc):
    def op(x):
        return torch_fn(_t(x))
    op.__doc__ = doc
    return op


def _binary(torch_fn, doc, floats=False):
    def op(x1, x2):
        a, b = _operand(x1), _operand(x2)
        if isinstance(a, (int, float, bool)) and isinstance(b, (int, float, bool)):
            a = _t(a)
        if floats:
            a = _float(a) if isinstance(a, torch.Tensor) else a
            b = _float(b) if isinstance(b, torch.Tensor) else b
        return torch_fn(a, b)
    op.__doc__ = doc
    return op


sqrt = _unary_float(torch.sqrt, "Element-wise square root (ints give float32).")
rsqrt = _unary_float(torch.rsqrt, "Element-wise 1 / sqrt(x).")
exp = _unary_float(torch.exp, "Element-wise e**x.")
expm1 = _unary_float(torch.expm1, "Element-wise e**x - 1.")
log = _unary_float(torch.log, "Element-wise natural logarithm.")
log1p = _unary_float(torch.log1p, "Element-wise log(1 + x).")
log2 = _unary_float(torch.log2, "Element-wise base-2 logarithm.")
log10 = _unary_float(torch.log10, "Element-wise base-10 logarithm.")
sin = _unary_float(torch.sin, "Element-wise sine.")
cos = _unary_float(torch.cos, "Element-wise cosine.")
tan = _unary_float(torch.tan, "Element-wise tangent.")
tanh = _unary_float(torch.tanh, "Element-wise hyperbolic tangent.")
arctan = _unary_float(torch.arctan, "Element-wise arctangent.")
arccos = _unary_float(torch.arccos, "Element-wise arccosine (keras.io's DDIM schedule: ops.arccos(0.95)).")
arcsin = _unary_float(torch.arcsin, "Element-wise arcsine.")
erf = _unary_float(torch.erf, "Element-wise error function.")
reciprocal = _unary_float(torch.reciprocal, "Element-wise 1 / x.")
square = _unary(torch.square, "Element-wise x**2 (ints stay ints).")
abs = _unary(torch.abs, "Element-wise |x| (ints stay ints).")  # noqa: A001 - Keras's name
absolute = abs
negative = _unary(torch.negative, "Element-wise -x.")
sign = _unary(torch.sign, "Element-wise sign (-1, 0, 1).")
floor = _unary_float(torch.floor, "Element-wise floor.")
ceil = _unary_float(torch.ceil, "Element-wise ceiling.")
isnan = _unary(torch.isnan, "Element-wise NaN test.")
isinf = _unary(torch.isinf, "Element-wise infinity test.")
isfinite = _unary(torch.isfinite, "Element-wise finiteness test.")
logical_not = _unary(torch.logical_not, "Element-wise not.")

add = _binary(torch.add, "Element-wise x1 + x2.")
subtract = _binary(torch.subtract, "Element-wise x1 - x2.")
multiply = _binary(torch.multiply, "Element-wise x1 * x2.")
divide = _binary(torch.true_divide, "Element-wise x1 / x2 (ints give floats).", floats=True)
true_divide = divide
floor_divide = _binary(torch.floor_divide, "Element-wise floor(x1 / x2).")
mod = _binary(torch.remainder, "Element-wise x1 mod x2 (the sign of x2, as numpy).")
power = _binary(torch.pow, "Element-wise x1 ** x2.")
equal = _binary(torch.eq, "Element-wise x1 == x2.")
not_equal = _binary(torch.ne, "Element-wise x1 != x2.")
greater = _binary(torch.gt, "Element-wise x1 > x2.")
greater_equal = _binary(torch.ge, "Element-wise x1 >= x2.")
less = _binary(torch.lt, "Element-wise x1 < x2.")
less_equal = _binary(torch.le, "Element-wise x1 <= x2.")
logical_and = _binary(torch.logical_and, "Element-wise and.")
logical_or = _binary(torch.logical_or, "Element-wise or.")
arctan2 = _binary(torch.atan2, "Element-wise arctan(x1 / x2) in the right quadrant.", floats=True)


def _tensors(x1, x2):
    """Both operands as tensors of their promoted dtype (a Python scalar typed weakly, as Keras does)."""
    a, b = _operand(x1), _operand(x2)
    if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor):
        a = _t(a)
    dtype = torch.result_type(a, b)
    device = (a if isinstance(a, torch.Tensor) else b).device
    return torch.as_tensor(a, dtype=dtype, device=device), torch.as_tensor(b, dtype=dtype, device=device)


def maximum(x1, x2):
    """Element-wise larger value."""
    return torch.maximum(*_tensors(x1, x2))


def minimum(x1, x2):
    """Element-wise smaller value."""
    return torch.minimum(*_tensors(x1, x2))


def round(x, decimals=0):  # noqa: A001 - Keras's name
    """Round half to even to ``decimals`` decimals."""
    return torch.round(_t(x), decimals=decimals)


def clip(x, x_min, x_max):
    """``x`` limited to [x_min, x_max] (ints stay ints)."""
    return torch.clamp(_t(x), x_min, x_max)


def where(condition, x1=None, x2=None):
    """``x1`` where ``condition`` else ``x2``; with the condition alone, the indices of its true elements."""
    condition = _t(condition)
    if x1 is None and x2 is None:
        return torch.nonzero(condition).T
    if x1 is None or x2 is None:
        raise ValueError("where: `x1` and `x2` must both be given, or neither (to get the indices of true "
                         f"elements); received x1={x1!r}, x2={x2!r}.")
    a, b = _operand(x1), _operand(x2)
    if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor):
        a, b = _t(a), _t(b)
    return torch.where(condition.bool(), a, b)


def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    """``x`` with NaN and infinities replaced."""
    return torch.nan_to_num(_t(x), nan=nan, posinf=posinf, neginf=neginf)


def matmul(x1, x2):
    """Matrix product (batched over leading axes)."""
    return torch.matmul(_t(x1), _t(x2))


def dot(x1, x2):
    """numpy's dot: matmul for matrices, a sum over the last/second-to-last axes otherwise."""
    a, b = _t(x1), _t(x2)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if b.ndim == 1:
        return torch.tensordot(a, b, dims=([a.ndim - 1], [0]))
    return torch.tensordot(a, b, dims=([a.ndim - 1], [b.ndim - 2]))


def tensordot(x1, x2, axes=2):
    """Sum of products over ``axes``: an int, or a pair of axes or axis lists (numpy's ``axes=(2, 2)``, which
    keras.io's PointNet regularizer uses; torch takes only lists there)."""
    if isinstance(axes, (list, tuple)):
        axes = tuple(a if isinstance(a, (list, tuple)) else (a,) for a in axes)
    return torch.tensordot(_t(x1), _t(x2), dims=axes)


def outer(x1, x2):
    """Outer product of the flattened inputs."""
    return torch.outer(_t(x1).reshape(-1), _t(x2).reshape(-1))


def einsum(subscripts, *operands, **kwargs):
    """Einstein summation (``torch.einsum``)."""
    return torch.einsum(subscripts, *[_t(o) for o in operands])


def diag(x, k=0):
    """The k-th diagonal of a matrix, or a matrix with a vector on it."""
    return torch.diag(_t(x), k)


def diagonal(x, offset=0, axis1=0, axis2=1):
    """The ``offset`` diagonal over two axes."""
    return torch.diagonal(_t(x), offset, axis1, axis2)


def trace(x, offset=0, axis1=0, axis2=1):
    """Sum of the ``offset`` diagonal."""
    return torch.diagonal(_t(x), offset, axis1, axis2).sum(-1)


def cross(x1, x2, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """3-vector cross product along the last axis."""
    return torch.linalg.cross(_t(x1), _t(x2), dim=-1 if axis is None else axis)
