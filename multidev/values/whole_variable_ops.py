"""Ops on a ``DistributedVariable`` as a whole, not on one replica's copy: ``requires_grad_``, ``p.data``
(read and write), ``register_hook`` and the refused ``register_post_accumulate_grad_hook``.

``DistributedVariable.__torch_function__`` looks each up in ``WHOLE_VARIABLE`` before it hands an op the
calling replica's copy. Kept apart from ``distributed_variable.py`` (the components and which one an op
sees); these functions only use the variable's own methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch._C import DisableTorchFunctionSubclass

from multidev.values import context

if TYPE_CHECKING:
    from multidev.values.distributed_variable import DistributedVariable


def _requires_grad_(var: DistributedVariable, requires_grad: bool = True) -> DistributedVariable:
    """``requires_grad_`` / ``p.requires_grad = ...``: every replica's copy follows (freezing a layer
    after the scope freezes it on every replica, as on one device). Unfrozen inside ``strategy.run``
    (ULMFiT's gradual unfreezing in the loop body: ``model.layers[k].requires_grad_(True)`` before the
    forward pass), the variable joins this run's gradient reduction at once, as a DDP rank's parameter
    joins its all-reduce (``find_unused_parameters=True``): the reduction hooks a variable before each
    run only if it needs gradients then, so each replica's first update applied its own gradient
    (0.08 off DDP's weights after 6 steps, the copies equal: silently)."""
    with DisableTorchFunctionSubclass():
        torch.Tensor.requires_grad_(var, requires_grad)
        for c in var._components:
            c.requires_grad_(requires_grad)
    unfrozen = requires_grad and var._reduce_in_backward and not var._backward_hooked
    if unfrozen and context.current_replica_id() is not None:
        var._strategy.extended.hook_new_variables()
    return var


def _set_data(var: DistributedVariable, value: torch.Tensor) -> None:
    """``p.data = t`` (what ``module.double()``, ``.half()``, ``.to(dtype)`` do to each parameter):
    every replica's copy takes the new value and dtype, on its own device. Inside ``strategy.run``
    only the calling replica's copy, as each DDP rank sets its own (MoCo's momentum update
    ``param_k.data = param_k.data * m + param_q.data * (1 - m)`` in ``forward``: a write to every copy
    would let the next replica average the already-averaged value again)."""
    if value is var:
        return
    replica_id = context.current_replica_id()
    if replica_id is not None and not var._share_storage:   # (one shared copy: CentralStorageStrategy's)
        _set_replica_data(var, replica_id, value)
        return
    if replica_id is not None and len(var._components) > 1 and var._components[0]._version != var._synced_version:
        # The one shared copy was written in place in the replicas before (SAM's ``p.add_(e_w)``, by every
        # replica): the run's end refuses it, which the versions this write resets would no longer show.
        var._shared_written_in_run = var._data_set_in_run = True
    with DisableTorchFunctionSubclass():
        new = value.detach()
        primary = var._components[0]
        if new.device != primary.device:
            raise ValueError(
                f"Cannot move {var._tf_name!r} (created in {type(var._strategy).__name__}.scope()) from {primary.device} "
                f"to {new.device}: the strategy places each replica's copy on its own device. Convert dtypes "
                "freely (model.double()), but leave devices to the strategy (drop the .to(device)/.cuda() call).")
        torch.Tensor.data.__set__(var, new)
        primary.data = torch.Tensor.data.__get__(var)
        for c in var._components[1:]:
            c.data = primary.data if var._share_storage else new.to(c.device, copy=True)
    var._mark_synced()


def _set_replica_data(var: DistributedVariable, replica_id: int, value: torch.Tensor) -> None:
    """``p.data = t`` in replica ``replica_id``: its copy takes ``t``'s values into its own storage (replica
    0's also the variable's), never ``t``'s storage: ``t`` may be one tensor every replica sets, and
    another replica's in-place update would then move this one's weights too. SAM's ``second_step``
    sets ``p.data = self.state[p]["old_p"]``, one tensor of the optimizer's state that every replica
    wrote under the same key: aliased, a replica that had already stepped its copy in place handed
    the others its updated weights (0.04 off one device after 4 steps, silently). Each DDP rank's
    parameter takes its own tensor. A ``t`` of another shape or dtype replaces the copy's storage with
    a clone. Through ``.data`` the copy's version counter does not move (as for ``p.data = t``): the
    copies are marked stale, so the run's end compares them (``_check_replica_writes``)."""
    with DisableTorchFunctionSubclass(), torch.no_grad():
        component = var._components[replica_id]
        new = value.detach()
        if new.shape == component.shape and new.dtype == component.dtype:
            component.data.copy_(new)
        else:
            new = new.to(component.device, copy=True)
            if replica_id == 0:
                torch.Tensor.data.__set__(var, new)
                component.data = torch.Tensor.data.__get__(var)
            else:
                component.data = new
    var._synced_version = -1
    var._data_set_in_run = True


def relink_primary(var: DistributedVariable) -> None:
    """Replica 0's copy shares the variable's storage again after ``.data`` was set on the copy itself
    (an optimizer's own ``step`` runs on its twin's plain tensors: SAM's ``p.data = old_p``), so reads
    of the variable outside the run see what replica 0 holds."""
    with DisableTorchFunctionSubclass():
        component = var._components[0]
        if torch.Tensor.untyped_storage(var).data_ptr() != component.untyped_storage().data_ptr():
            torch.Tensor.data.__set__(var, component.detach())
            component.data = torch.Tensor.data.__get__(var)
            var._synced_version = -1
            var._data_set_in_run = True


def _get_data(var: DistributedVariable) -> torch.Tensor:
    """``p.data``: a replica's copy's in a replica; in cross-replica context the primary's, and the
    next run copies the primary to every replica, since a write through it (``m.bias.data.fill_(0.01)``
    in a model's ``__init__``, as pytorch/examples' siamese network does) leaves torch's version
    counter, which ``_sync_if_stale`` watches, alone."""
    replica_id = context.current_replica_id()
    with DisableTorchFunctionSubclass():
        if replica_id is not None:
            return torch.Tensor.data.__get__(var._view_for(replica_id))
        var._data_handed_out = True
        return torch.Tensor.data.__get__(var._view_for(None))


class _Handles:
    """The handles of one hook registered on several tensors: ``remove()`` removes it from each."""

    def __init__(self, handles: list):
        self._handles = handles

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()

    def __enter__(self) -> "_Handles":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def _register_hook(var: DistributedVariable, hook: Any) -> Any:
    """``p.register_hook(hook)`` outside ``strategy.run`` (a DDP program's gradient hooks on the model's
    parameters, registered before training): every replica's copy runs it on that replica's gradient,
    before ``loss.backward()`` reduces them, as each DDP rank runs it before its all-reduce (on the
    variable itself, it would never run: the replicas differentiate their copies). Inside a replica:
    that replica's copy only."""
    replica_id = context.current_replica_id()
    with DisableTorchFunctionSubclass():
        if replica_id is not None:
            return torch.Tensor.register_hook(var._components[replica_id], hook)
        return _Handles([torch.Tensor.register_hook(t, hook) for t in (var, *var._components)])


def _refuse_post_accumulate_hook(var: DistributedVariable, hook: Any) -> Any:
    """``p.register_post_accumulate_grad_hook(hook)`` (an optimizer step in backward): it would run on each
    replica's own gradient, before ``loss.backward()`` reduces them (on each DDP rank alike)."""
    raise ValueError(
        f"register_post_accumulate_grad_hook on {var.name!r}, made in {type(var._strategy).__name__}.scope(): the "
        "hook would run on each replica's own gradient as autograd accumulates it, before loss.backward() reduces "
        "the replicas' gradients (each DDP rank's alike), so an optimizer step in it would train every replica on "
        "its own slice. Call optimizer.step() after loss.backward() instead.")


WHOLE_VARIABLE: dict = {
    torch.Tensor.register_hook: _register_hook,
    torch.Tensor.register_post_accumulate_grad_hook: _refuse_post_accumulate_hook,
    torch.Tensor.data.__get__: _get_data,
    torch.Tensor.requires_grad_: _requires_grad_,
    torch.Tensor.requires_grad.__set__: _requires_grad_,
    torch.Tensor.data.__set__: _set_data,
}
