"""``md.math``: TensorFlow's ``tf.math`` names that multidev provides (thin aliases of torch
functions, ``multidev.array_ops``), with ``reduce_sum``/``reduce_mean`` from ``multidev.ops``.

Example:
    >>> md.math.reduce_sum(md.constant([1.0, 2.0])).item(), md.math.argmax(md.constant([1, 3, 2])).item()
    (3.0, 1)
"""

from __future__ import annotations

from multidev.array_ops import (abs, add, argmax, argmin, divide, equal, exp, greater, greater_equal, less,  # noqa: A004
                                less_equal, log, maximum, minimum, multiply, negative, not_equal, pow, reduce_all,
                                reduce_any, reduce_max, reduce_min, reduce_prod, round, sigmoid, sign, sqrt, square,
                                subtract, tanh)
from multidev.nn import log_softmax, softmax   # tf.math.softmax is tf.nn.softmax
from multidev.ops import add_n, reduce_mean, reduce_sum

__all__ = ["abs", "add", "add_n", "argmax", "argmin", "divide", "equal", "exp", "greater", "greater_equal", "less",
           "less_equal", "log", "log_softmax", "maximum", "minimum", "multiply", "negative", "not_equal", "pow", "reduce_all",
           "reduce_any", "reduce_max", "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum", "round", "sigmoid",
           "sign", "softmax", "sqrt", "square", "subtract", "tanh"]


def __getattr__(name: str):
    from multidev._core.missing import missing_attribute

    raise missing_attribute("multidev.math", name, f"tf.math.{name}")
