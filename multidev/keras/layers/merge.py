"""Merge layers over a list of inputs: Concatenate, Add, Subtract, Multiply, Average, Maximum, Minimum, Dot.

Example:
    merged = md.keras.layers.Concatenate()([a, b])     # along the last axis
"""

from __future__ import annotations

import functools

import torch

from multidev.keras.layers.base import Layer


class _Merge(Layer):
    """Element-wise merge of a list of tensors, broadcast as Keras 3 broadcasts them: a dimension of 1 meets any
    size ((batch, 1) attention weights times (batch, 8) embeddings in keras.io's attention MIL), and a
    lower-rank input is expanded at axis 1 until the ranks agree."""

    _reshape_required = False

    def build(self, input_shape):
        if not isinstance(input_shape, list) or len(input_shape) < 2:
            raise ValueError(f'A merge layer "{self.name}" should be called on a list of at least 2 inputs. '
                             f"Received: input_shape={input_shape!r}")
        if type(self) is Concatenate:
            return
        out = tuple(input_shape[0][1:])
        for shape in input_shape[1:]:
            out = _broadcast(self.name, out, tuple(shape[1:]))
        self._reshape_required = len({len(s) for s in input_shape}) > 1

    def call(self, inputs):
        return functools.reduce(self._op, self._ranked(inputs))

    def _ranked(self, inputs) -> list:
        """The inputs at one rank (a lower-rank input expanded at axis 1, as Keras 3 does)."""
        if not self._reshape_required:
            return list(inputs)
        rank = max(x.dim() for x in inputs)
        return [x.reshape(x.shape[:1] + (1,) * (rank - x.dim()) + x.shape[1:]) for x in inputs]


def _broadcast(name, a: tuple, b: tuple) -> tuple:
    """Keras 3's element-wise output shape of two shapes (batch dimension excluded), right-aligned."""
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return a
    out = list(a[:len(a) - len(b)])
    for i, j in zip(a[len(a) - len(b):], b):
        if i is None or j is None:
            out.append(None)
        elif i == 1 or j == 1:
            out.append(j if i == 1 else i)
        elif i != j:
            raise ValueError(f'Inputs of layer "{name}" have incompatible shapes. Received shapes {a} and {b}: '
                             "each dimension must be equal or 1 (broadcast).")
        else:
            out.append(i)
    return tuple(out)


class Add(_Merge):
    """Sum of the inputs."""

    _op = staticmethod(torch.add)


class Subtract(_Merge):
    """First input minus the second."""

    _op = staticmethod(torch.sub)


class Multiply(_Merge):
    """Element-wise product."""

    _op = staticmethod(torch.mul)


def _tf_maximum(x, y):
    """max(x, y) with TF's gradient: a tie's gradient goes to ``x`` whole (torch.maximum halves it)."""
    return torch.where(x >= y, x, y)


def _tf_minimum(x, y):
    """min(x, y) with TF's gradient: a tie's gradient goes to ``x`` whole."""
    return torch.where(x <= y, x, y)


class Maximum(_Merge):
    """Element-wise maximum."""

    _op = staticmethod(_tf_maximum)


class Minimum(_Merge):
    """Element-wise minimum."""

    _op = staticmethod(_tf_minimum)


class Dot(Layer):
    """Keras's ``batch_dot`` of two inputs over ``axes`` (one int for both, or one per input); with
    ``normalize=True`` each input is first L2-normalized along its axis (cosine proximity)."""

    def __init__(self, axes, normalize=False, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(axes, int) and not (isinstance(axes, (list, tuple)) and len(axes) == 2
                                              and all(isinstance(a, int) for a in axes)):
            raise TypeError(f"Invalid type for argument `axes`: it should be an int or a list/tuple of 2 ints. "
                            f"Received: axes={axes!r}")
        self.axes, self.normalize = axes, bool(normalize)

    def call(self, inputs):
        if not isinstance(inputs, (list, tuple)) or len(inputs) != 2:
            raise ValueError("A `Dot` layer should be called on a list of 2 inputs.")
        x, y = inputs
        axes = (self.axes, self.axes) if isinstance(self.axes, int) else tuple(self.axes)
        ax, ay = axes[0] % x.ndim, axes[1] % y.ndim
        if self.normalize:   # Keras's l2 normalize: x * min(rsqrt(sum(x^2)), 1e12)
            x = x * torch.clamp(torch.rsqrt((x * x).sum(ax, keepdim=True)), max=1e12)
            y = y * torch.clamp(torch.rsqrt((y * y).sum(ay, keepdim=True)), max=1e12)
        xm, ym = x.movedim(ax, -1), y.movedim(ay, 1)
        rest_x, rest_y = xm.shape[1:-1], ym.shape[2:]
        out = torch.bmm(xm.reshape(x.shape[0], -1, x.shape[ax]), ym.reshape(y.shape[0], y.shape[ay], -1))
        out = out.reshape(x.shape[0], *rest_x, *rest_y)
        return out.unsqueeze(1) if out.ndim == 1 else out

    def get_config(self):
        return {**super().get_config(), "axes": self.axes, "normalize": self.normalize}


class Average(_Merge):
    """Element-wise mean."""

    def call(self, inputs):
        return functools.reduce(torch.add, self._ranked(inputs)) / len(inputs)


class Concatenate(_Merge):
    """Concatenation along ``axis`` (last by default)."""

    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis

    def build(self, input_shape):
        super().build(input_shape)
        ranks = {len(s) for s in input_shape}
        others = {tuple(d for i, d in enumerate(s) if i not in (0, self.axis % len(s))) for s in input_shape}
        if len(ranks) > 1 or len(others) > 1:
            raise ValueError(
                "A `Concatenate` layer requires inputs with matching shapes except for the concatenation axis. "
                f"Received: input_shape={input_shape}"
            )

    def call(self, inputs):
        return torch.cat(list(inputs), dim=self.axis)

    def get_config(self):
        return {**super().get_config(), "axis": self.axis}


def add(inputs, **kwargs):
    """Functional form of ``Add``."""
    return Add(**kwargs)(inputs)


def concatenate(inputs, axis=-1, **kwargs):
    """Functional form of ``Concatenate``."""
    return Concatenate(axis=axis, **kwargs)(inputs)


def subtract(inputs, **kwargs):
    """Functional form of ``Subtract``."""
    return Subtract(**kwargs)(inputs)


def multiply(inputs, **kwargs):
    """Functional form of ``Multiply`` (keras.io's attention MIL weighs each instance with it)."""
    return Multiply(**kwargs)(inputs)


def average(inputs, **kwargs):
    """Functional form of ``Average``."""
    return Average(**kwargs)(inputs)


def maximum(inputs, **kwargs):
    """Functional form of ``Maximum``."""
    return Maximum(**kwargs)(inputs)


def minimum(inputs, **kwargs):
    """Functional form of ``Minimum``."""
    return Minimum(**kwargs)(inputs)


def dot(inputs, axes=-1, normalize=False, **kwargs):
    """Functional form of ``Dot``."""
    return Dot(axes=axes, normalize=normalize, **kwargs)(inputs)
