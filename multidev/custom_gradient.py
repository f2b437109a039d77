"""``md.custom_gradient``: TensorFlow's decorator for a function with its own gradient, over a
``torch.autograd.Function``.

The decorated ``f(*x)`` returns ``(y, grad_fn)``; ``y`` is computed without recording (as TensorFlow
computes it: only ``grad_fn`` defines how gradients flow back), and ``grad_fn(*upstream)`` returns one
gradient per tensor argument of ``f``. ``md.GradientTape`` and ``torch.autograd`` both see it.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import torch


def custom_gradient(f: Callable | None = None) -> Callable:
    """Decorate ``f`` so that gradients through it are what its ``grad_fn`` says.

    Example (the advanced-autodiff guide's gradient clipping):
        >>> @md.custom_gradient
        ... def clip_gradients(y):
        ...     def backward(dy):
        ...         return md.clip_by_norm(dy, 0.5)
        ...     return y, backward
    """
    if f is None:
        return custom_gradient
    if not callable(f):
        raise TypeError(f"md.custom_gradient decorates a callable, got {f!r}.")

    @functools.wraps(f)
    def decorated(*args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise TypeError(f"The custom_gradient function {f.__name__!r} takes its inputs by position (TensorFlow "
                            f"differentiates positional tensor arguments only); got keyword arguments {sorted(kwargs)!r}.")
        positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        call = _Call(f, args, positions)
        outputs = _CustomGradient.apply(call, *[args[i] for i in positions])
        return outputs[0] if call.single else outputs

    return decorated


class _Call:
    """One call's function, its non-tensor arguments and, after the forward pass, its ``grad_fn``."""

    def __init__(self, f: Callable, args: tuple, positions: list[int]):
        self.f, self.args, self.positions = f, args, positions
        self.grad_fn: Callable | None = None
        self.single = True

    def forward(self, tensors: tuple) -> tuple:
        args = list(self.args)
        for i, t in zip(self.positions, tensors):
            args[i] = t
        result = self.f(*args)
        if not (isinstance(result, (tuple, list)) and len(result) == 2 and callable(result[1])):
            raise TypeError(f"A custom_gradient function must return (outputs, grad_fn), got {result!r} from "
                            f"{self.f.__name__!r}.")
        outputs, grad_fn = result
        if "variables" in inspect.signature(grad_fn).parameters:
            raise NotImplementedError(f"{self.f.__name__!r}'s grad_fn takes variables=: multidev's custom_gradient "
                                      "differentiates only the function's tensor arguments; pass the variables it "
                                      "reads as arguments.")
        self.grad_fn = grad_fn
        self.single = not isinstance(outputs, (tuple, list))
        outputs = (outputs,) if self.single else tuple(outputs)
        return tuple(o if isinstance(o, torch.Tensor) else torch.as_tensor(o) for o in outputs)

    def backward(self, upstream: tuple) -> tuple:
        grads = self.grad_fn(*upstream)
        grads = tuple(grads) if isinstance(grads, (tuple, list)) else (grads,)
        if len(grads) != len(self.positions):
            raise ValueError(f"custom_gradient function {self.f.__name__!r}'s grad_fn returned {len(grads)} gradients "
                             f"for {len(self.positions)} tensor input(s); return one gradient (or None) per input.")
        return grads


class _CustomGradient(torch.autograd.Function):
    """The forward pass runs ``f`` unrecorded; the backward pass calls its ``grad_fn``."""

    @staticmethod
    def forward(ctx, call: _Call, *tensors: torch.Tensor) -> tuple:
        ctx.call = call
        return call.forward(tensors)

    @staticmethod
    def backward(ctx, *upstream: torch.Tensor) -> tuple:
        return (None, *ctx.call.backward(upstream))
