"""More of ``keras.ops``' element-wise math on torch: hyperbolic, rounding, bitwise and comparison ops.

Dtypes follow Keras 3 on its torch backend: float-valued ops on ints give floats (``hypot``,
``heaviside``, ``exp2``, ``fabs``: float32; int64 to float64 where Keras says so), ``trunc``,
``fmod``, ``gcd`` and the bitwise ops keep integer dtypes, tests give bools. Python scalars are
weakly typed, as in Keras.

Example:
    ops.logaddexp(log_p, log_q)          # log(exp(a) + exp(b)) without overflow
    ops.divide_no_nan(total, count)      # 0 where count == 0
"""

from __future__ import annotations

import torch

from multidev.keras import backend
from multidev.keras.ops.core import convert_to_tensor
from multidev.keras.ops.elementwise import _tensors, _unary, _unary_float

_t = convert_to_tensor


def _floatx():
    return backend.as_dtype(backend.floatx())


def _to_float(x):
    """Ints and bools as floatx, int64 as float64 (Keras's rule for ``hypot``/``heaviside``/``cbrt``)."""
    if x.is_floating_point() or x.is_complex():
        return x
    return x.to(torch.float64 if x.dtype == torch.int64 else _floatx())


def _float_pair(x1, x2):
    a, b = _tensors(x1, x2)
    return _to_float(a), _to_float(b)


arccosh = _unary_float(torch.arccosh, "Element-wise inverse hyperbolic cosine.")
arcsinh = _unary_float(torch.arcsinh, "Element-wise inverse hyperbolic sine.")
arctanh = _unary_float(torch.arctanh, "Element-wise inverse hyperbolic tangent.")
cosh = _unary_float(torch.cosh, "Element-wise hyperbolic cosine.")
sinh = _unary_float(torch.sinh, "Element-wise hyperbolic sine.")
exp2 = _unary_float(torch.exp2, "Element-wise 2**x.")
fabs = _unary_float(torch.abs, "Element-wise |x| as floats (ints give floatx, unlike ``abs``).")
sinc = _unary_float(torch.sinc, "Element-wise normalised sinc: sin(pi x) / (pi x).")
erfc = _unary_float(torch.special.erfc, "Element-wise complementary error function 1 - erf(x).")
erfinv = _unary_float(torch.special.erfinv, "Element-wise inverse error function.")
signbit = _unary(torch.signbit, "Element-wise test of the sign bit (True for -0.0 and negatives).")
isneginf = _unary(torch.isneginf, "Element-wise test for -inf.")
isposinf = _unary(torch.isposinf, "Element-wise test for +inf.")
bitwise_invert = _unary(torch.bitwise_not, "Element-wise bitwise not (~x; logical not for bools).")
bitwise_not = bitwise_invert


def cbrt(x):
    """Element-wise real cube root (negative inputs give negative roots)."""
    x = _to_float(_t(x))
    return torch.sign(x) * torch.abs(x).pow(1.0 / 3.0)


def deg2rad(x):
    """Degrees to radians (int64 gives float64, other ints floatx)."""
    return torch.deg2rad(_to_float(_t(x)))


def rad2deg(x):
    """Radians to degrees (int64 gives float64, other ints floatx)."""
    return torch.rad2deg(_to_float(_t(x)))


def trunc(x):
    """Element-wise rounding toward zero (ints and bools stay as they are)."""
    x = _t(x)
    return x if not x.is_floating_point() else torch.trunc(x)


def fmod(x1, x2):
    """Element-wise C remainder: the sign of ``x1`` (``mod`` takes the sign of ``x2``)."""
    a, b = _tensors(x1, x2)
    if a.dtype == torch.bool:
        a, b = a.int(), b.int()
    return torch.fmod(a, b)


def hypot(x1, x2):
    """Element-wise sqrt(x1**2 + x2**2) without overflow."""
    return torch.hypot(*_float_pair(x1, x2))


def heaviside(x1, x2):
    """Step function: 0 for x1 < 0, ``x2`` for x1 == 0, 1 for x1 > 0."""
    return torch.heaviside(*_float_pair(x1, x2))


def _float_result(x1, x2):
    a, b = _tensors(x1, x2)
    if not a.is_floating_point():
        a, b = a.to(_floatx()), b.to(_floatx())
    return a, b


def logaddexp(x1, x2):
    """log(exp(x1) + exp(x2)), computed stably."""
    return torch.logaddexp(*_float_result(x1, x2))


def logaddexp2(x1, x2):
    """log2(2**x1 + 2**x2), computed stably."""
    return torch.logaddexp2(*_float_result(x1, x2))


def divide_no_nan(x1, x2):
    """x1 / x2, and 0 where x2 == 0 (Keras's safe division for averages over empty sets)."""
    a, b = _float_result(x1, x2)
    zero = b == 0
    return torch.where(zero, torch.zeros((), dtype=a.dtype, device=a.device), a / torch.where(zero, 1, b))


def isclose(x1, x2, rtol=1e-5, atol=1e-8, equal_nan=False):
    """Element-wise |x1 - x2| <= atol + rtol * |x2| (exact equality for ints)."""
    a, b = _tensors(x1, x2)
    if not a.is_floating_point():
        return torch.eq(a, b)
    return torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def allclose(x1, x2, rtol=1e-5, atol=1e-8, equal_nan=False):
    """Whether ``isclose`` holds everywhere (a bool tensor, as Keras's op)."""
    return torch.all(isclose(x1, x2, rtol=rtol, atol=atol, equal_nan=equal_nan))


def _pairwise(torch_fn, doc):
    """A binary op whose torch function takes tensors only (a Python scalar made a weakly typed tensor)."""
    def op(x1, x2):
        return torch_fn(*_tensors(x1, x2))
    op.__doc__ = doc
    return op


logical_xor = _pairwise(torch.logical_xor, "Element-wise exclusive or.")
gcd = _pairwise(torch.gcd, "Element-wise greatest common divisor of integers.")
lcm = _pairwise(torch.lcm, "Element-wise least common multiple of integers.")
bitwise_and = _pairwise(torch.bitwise_and, "Element-wise bitwise and.")
bitwise_or = _pairwise(torch.bitwise_or, "Element-wise bitwise or.")
bitwise_xor = _pairwise(torch.bitwise_xor, "Element-wise bitwise xor.")


def bitwise_left_shift(x, y):
    """Element-wise x << y."""
    return torch.bitwise_left_shift(_t(x), y if isinstance(y, int) else _t(y))


def bitwise_right_shift(x, y):
    """Element-wise x >> y (arithmetic for signed ints)."""
    return torch.bitwise_right_shift(_t(x), y if isinstance(y, int) else _t(y))


left_shift = bitwise_left_shift
right_shift = bitwise_right_shift


for _op in list(vars().values()):   # ops built by the factories belong to this module (ops.__all__ lists them)
    if callable(_op) and getattr(_op, "__module__", None) == "multidev.keras.ops.elementwise" \
            and getattr(_op, "__qualname__", "").endswith("<locals>.op"):
        _op.__module__ = __name__
del _op
