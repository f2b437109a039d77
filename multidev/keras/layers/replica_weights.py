"""One replica's copy of a Keras layer's trainable weight, as a layer's ``call`` sees it inside ``strategy.run``.

A module's replica-aware dicts hand a replica its own leaf tensor of each distributed weight (the fast path:
ops on it are plain torch ops). TensorFlow hands a replica's layer the variable, and programs write it there:
keras.io's PixelCNN masks its kernel in ``call`` (``self.conv.kernel.assign(self.conv.kernel * self.mask)``),
each replica writing its own copy (aggregation NONE, TensorFlow 2.21's Keras 3 and tf_keras alike:
``tests/keras/tf_2.21_masked_kernel_assign.json``). So the copies of a Keras layer's trainable weight are
``KerasReplicaWeight``s: the same leaf tensors with ``KerasParameter``'s variable API (``assign*`` write this
replica's copy, outside autograd; ``numpy``, ``value``, ``name``). Torch function dispatch stays off, as on
``nn.Parameter``, so the ops of the training hot path cost what they did. Copies that the writes leave apart
still raise at the run's end (``DistributedVariable._check_replica_writes``).
"""

from __future__ import annotations

import torch

from multidev.keras.layers.layer_weights import KerasParameter
from multidev.values.variables import DistributedVariable, variable_of


class KerasReplicaWeight(torch.Tensor):
    """A replica's copy of a Keras layer's trainable weight (see the module docstring)."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __new__(cls, data: torch.Tensor, requires_grad: bool):
        return torch.Tensor._make_subclass(cls, data, requires_grad)

    def __reduce_ex__(self, proto):
        return torch.Tensor.__reduce_ex__(self.as_subclass(torch.Tensor), proto)

    def __deepcopy__(self, memo):
        """A plain leaf copy, as torch copies a plain copy (a replica's ``copy.deepcopy(module)``)."""
        if id(self) not in memo:
            memo[id(self)] = self.detach().clone().as_subclass(torch.Tensor).requires_grad_(self.requires_grad)
        return memo[id(self)]

    @property
    def name(self) -> str | None:
        """The weight's name (``'kernel'``), the variable's."""
        owner = variable_of(self)
        return None if owner is self else owner.name

    @property
    def path(self) -> str | None:
        owner = variable_of(self)
        return None if owner is self else getattr(owner, "path", None)

    value = KerasParameter.value
    trainable = KerasParameter.trainable
    numpy = KerasParameter.numpy
    read_value = KerasParameter.read_value
    assign = KerasParameter.assign
    assign_add = KerasParameter.assign_add
    assign_sub = KerasParameter.assign_sub
    _update = KerasParameter._update


def assignable_copies(weight: DistributedVariable) -> None:
    """Make ``weight``'s replica copies ``KerasReplicaWeight``s, in place (the same tensor objects)."""
    weight._retype_components(KerasReplicaWeight)
