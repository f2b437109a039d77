"""Merge layers over a list of inputs: Concatenate, Add, Subtract, Multiply, Average, Maximum, Minimum, Dot.

Example:
    merged = md.keras.layers.Concatenate()([a, b])     # along the last axis
"""

from __future__ import annotations

import functools

import torch

from multidev.keras.layers.base import Layer


class _Merge(Layer):
    """Element-wise merge of a list of same-shaped tensors."""

    def build(self, input_shape):
        if not isinstance(input_shape, list) or len(input_shape) < 2:
            raise ValueError(f'A merge layer "{self.name}" should be called on a list of at least 2 inputs. '
                             f"Received: input_shape={input_shape!r}")
        tails = {tuple(s[1:]) for s in input_shape}
        if len(tails) > 1 and type(self) is not Concatenate:
            raise ValueError(f'Inputs of layer "{self.name}" must have the same shape. Received shapes {input_shape}')

    def call(self, inputs):
        return functools.reduce(self._op, inputs)


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
        return functools.reduce(torch.add, inputs) / len(inputs)


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
