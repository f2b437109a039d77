"""Gradients that a backward pass outside ``strategy.run`` leaves on a distributed variable.

Outside runs an op sees the variable itself (``_view_for(None)``), so ``loss.backward()`` there (EWC's Fisher
pass, a SNIP score, a gradient-norm probe between steps) accumulates into the variable's own autograd slot,
which ``DistributedVariable.grad`` does not show: it shows the replicas' copies' gradients, which optimizers
and the in-run reduction use. Each DDP rank runs such a pass itself and finds the gradient in its own
``p.grad``, added to what was there. So the variable's own gradient is added into every copy's ``.grad``
when ``p.grad`` is next read outside a run and before the next run (``fold``); setting ``p.grad`` outside
a run drops it (``discard``).
"""

from __future__ import annotations

from typing import Any, Iterable

import torch
from torch._C import DisableTorchFunctionSubclass

_own_grad = torch._C.TensorBase.grad   # the autograd slot under the subclass's ``grad`` property


def fold(variable: Any) -> None:
    """Add the variable's own gradient into each replica copy's ``.grad`` (in place where one is there, as
    autograd accumulates), and empty its own slot."""
    with DisableTorchFunctionSubclass():   # the slot itself, not the variable's torch-function dispatch (11 us)
        own = _own_grad.__get__(variable)
        if own is None:
            return
        _own_grad.__set__(variable, None)
    with torch.no_grad():
        for i, component in enumerate(variable._components):
            grad = own if i == 0 else own.to(component.device, copy=True)
            if component.grad is None:
                component.grad = grad
            else:
                component.grad.add_(grad)


_backward_outside = [False]   # a backward ran outside replicas since the last ``fold_all`` (``note_backward``)


def note_backward() -> None:
    """A backward outside ``strategy.run`` (``shared_leaves``' wrapper of ``torch.autograd.backward``): the next
    run's ``fold_all`` looks at the variables' slots; runs with none in between pay one flag check."""
    _backward_outside[0] = True


def fold_all(variables: Iterable[Any]) -> None:
    """``fold`` for each variable (before a run), after a backward outside runs: one look at each slot."""
    if not _backward_outside[0]:
        return
    _backward_outside[0] = False
    with DisableTorchFunctionSubclass():
        pending = [v for v in variables if _own_grad.__get__(v) is not None]
    for variable in pending:
        fold(variable)


def discard(variable: Any) -> None:
    with DisableTorchFunctionSubclass():
        if _own_grad.__get__(variable) is not None:
            _own_grad.__set__(variable, None)
