"""``md.autodiff.ForwardAccumulator``: TensorFlow's forward-mode autodiff (Jacobian-vector products).

TensorFlow carries each tangent forward with the ops. multidev records the ops in torch's autograd
graph, as a ``GradientTape`` does, and computes a JVP when asked by the double-backward identity: for
``g(u) = J^T u`` (a vector-Jacobian product taken with a graph, ``u`` a dummy cotangent), ``J t`` is
the gradient of ``g(u) . t`` with respect to ``u``. Same numbers, computed on demand; every op of the
recorded computation needs a differentiable backward (torch's built-in ops have one). A JVP is itself
recorded, so an enclosing accumulator or tape differentiates it again (``acc.jvp(acc2.jvp(y))``, and
forward-over-backward Hessian-vector products ``acc.jvp(tape.gradient(y, v))``).
"""

from __future__ import annotations

import threading
from typing import Any

import torch

from multidev import autodiff
from multidev.values.distributed import flatten, pack_as


def _as_tensor(value: Any, like: torch.Tensor) -> torch.Tensor:
    """A tangent as a tensor of its primal's dtype (a Python number converts; another tensor dtype is
    TensorFlow's ValueError)."""
    if isinstance(value, torch.Tensor):
        if value.dtype != like.dtype:
            raise ValueError(f"Tensor conversion requested dtype {str(like.dtype).replace('torch.', '')} for the "
                             f"tangent of dtype {str(value.dtype).replace('torch.', '')}: {value!r}. Give each "
                             "tangent its primal's dtype.")
        return value.detach()
    return torch.as_tensor(value, dtype=like.dtype, device=like.device)


class ForwardAccumulator:
    """Computes Jacobian-vector products of what is computed from ``primals`` inside its ``with`` block.

    Example:
        >>> v = md.Variable([1., 2.])
        >>> with md.autodiff.ForwardAccumulator(v, md.constant([1., 0.])) as acc:
        ...     y = md.reduce_sum(v ** 3.)
        >>> float(acc.jvp(y))   # d y / d v . [1, 0]
        3.0
    """

    def __init__(self, primals: Any, tangents: Any):
        self._primals = [p for p in flatten(primals)]
        tangent_list = flatten(tangents)
        if len(tangent_list) != len(self._primals):
            raise ValueError(f"The two structures don't have the same nested structure: primals={primals!r}, "
                             f"tangents={tangents!r}. Give one tangent per primal, in the same structure.")
        seen: set = set()
        for p in self._primals:
            if not isinstance(p, torch.Tensor):
                raise ValueError(f"ForwardAccumulator primals must be tensors or variables, got {p!r}.")
            if id(p) in seen:
                raise ValueError(f"Tensor {p!r} was specified as a primal multiple times. This may indicate an error. "
                                 "If it was intended, please sum the corresponding tangents.")
            seen.add(id(p))
        self._tangents = [_as_tensor(t, p) for p, t in zip(self._primals, tangent_list)]
        for p, t in zip(self._primals, self._tangents):
            if tuple(t.shape) != tuple(p.shape):
                raise ValueError(f"Shapes must be equal: a primal of shape {tuple(p.shape)} has a tangent of shape "
                                 f"{tuple(t.shape)}. Give each tangent its primal's shape.")
        self._tape = autodiff.GradientTape(persistent=True)
        self._tape.watch([p for p in self._primals if p.is_floating_point() or p.is_complex()])
        self._ended_at: int | None = None

    def __enter__(self) -> "ForwardAccumulator":
        self._tape.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._tape._knows_order():
            self._ended_at = autodiff._sequence_now()
        self._tape.__exit__(*exc)

    def _recorded(self, target: torch.Tensor) -> bool:
        """Whether ``target`` was computed inside the block (what TensorFlow carried a tangent for)."""
        if target.grad_fn is None or not target.requires_grad:
            return False
        if self._tape._thread != threading.get_ident() or self._tape._started_at is None:
            return True
        seq = getattr(target, "_md_recorded_at", None) or target.grad_fn._sequence_nr()
        return seq > self._tape._started_at and (self._ended_at is None or seq < self._ended_at)

    def jvp(self, primals: Any, unconnected_gradients: Any = autodiff.UnconnectedGradients.NONE) -> Any:
        """The Jacobian-vector product of each tensor in ``primals`` (a structure), with the tangents:
        a primal's own is its tangent; None for a tensor computed outside the block or not from the
        primals (zeros with ``unconnected_gradients=md.UnconnectedGradients.ZERO``)."""
        unconnected = autodiff._unconnected(unconnected_gradients)
        out = []
        for target in flatten(primals):
            value = self._jvp_of(target) if isinstance(target, torch.Tensor) else None
            if value is None and unconnected is autodiff.UnconnectedGradients.ZERO and isinstance(target, torch.Tensor):
                value = torch.zeros_like(target.detach())
            out.append(value)
        return pack_as(primals, out)

    def _jvp_of(self, target: torch.Tensor) -> torch.Tensor | None:
        for p, t in zip(self._primals, self._tangents):
            if target is p:
                return t
        if not (target.is_floating_point() or target.is_complex()) or not self._recorded(target):
            return None
        pairs = [(p, t) for p, t in zip(self._primals, self._tangents) if p.requires_grad]
        if not pairs:
            return None
        with torch.enable_grad():
            cotangent = torch.zeros_like(target.detach(), requires_grad=True)
            vjps = torch.autograd.grad(target, [p for p, _ in pairs], grad_outputs=cotangent, create_graph=True,
                                       allow_unused=True)
            used = [(g, t) for g, (_, t) in zip(vjps, pairs) if g is not None and g.requires_grad]
            if not used:
                return None
            (jvp,) = torch.autograd.grad([g for g, _ in used], cotangent, grad_outputs=[t for _, t in used],
                                         create_graph=True, allow_unused=True)
        if jvp is None:
            return None
        jvp = autodiff.readable(jvp)
        # computed now, but TensorFlow carried it forward with its target: an enclosing accumulator sees it
        # as recorded when the target was (``acc.jvp(acc2.jvp(y))`` after both blocks)
        jvp._md_recorded_at = getattr(target, "_md_recorded_at", None) or target.grad_fn._sequence_nr()
        return jvp
