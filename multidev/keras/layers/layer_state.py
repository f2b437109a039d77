"""A Keras layer's state weights (``add_weight(trainable=False)``) on a strategy, as TensorFlow keeps them.

Layers update state in ``call``: the guides' ``ComputeSum`` (``self.total.assign_add(...)``), batch
counters, moving statistics. Under a distributing strategy TensorFlow makes such a weight a
``tf.Variable`` of the scope (tf.keras 2 and Keras 3 alike): a ``MirroredVariable`` with aggregation
NONE unless ``add_weight`` says otherwise, so in ``strategy.run`` and ``fit`` each replica writes its
own copy and ``.numpy()`` reads replica 0's; ``aggregation=SUM/MEAN/ONLY_FIRST_REPLICA`` (or Keras 3's
``"sum"``, ...) reduce the replicas' writes; ``synchronization=ON_READ`` keeps one copy per replica,
reduced when read in cross-replica context. Here the weight is that distributed variable, handed
whole to every replica (``DistributedVariable._handed_whole``), so ``assign*`` follow its aggregation.

A functional model infers its layers' output shapes by running them on zeros (``keras_tensor``);
TensorFlow runs them symbolically, so no state changes: ``untouched_by_inference`` puts back what such
a run wrote into state weights, including those its ``build`` created.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

import torch
from torch._C import DisableTorchFunctionSubclass

from multidev._core.enums import VariableAggregation, VariableSynchronization
from multidev.values import context
from multidev.values.variables import DistributedVariable

_AGGREGATIONS = ("none", "sum", "mean", "only_first_replica")


def resolve_policy(name: str, trainable: Any, synchronization: Any, aggregation: Any):
    """``(trainable, synchronization, aggregation)`` of an ``add_weight`` call, checked as tf.keras 2
    checks them (an ON_READ weight cannot be trainable; trainable defaults to True, to False for
    ON_READ); both TensorFlow's enums and Keras 3's strings are accepted."""
    try:
        synchronization = VariableSynchronization.from_value(synchronization)
        aggregation = VariableAggregation.from_value(aggregation)
    except ValueError as exc:
        raise ValueError(
            f"Invalid synchronization {synchronization!r} or aggregation {aggregation!r} for weight {name!r}: "
            f"aggregation is an md.VariableAggregation (NONE, SUM, MEAN, ONLY_FIRST_REPLICA) or Keras 3's string "
            f"{list(_AGGREGATIONS)}; synchronization an md.VariableSynchronization (AUTO, ON_WRITE, ON_READ) "
            "or its name.") from exc
    if synchronization is VariableSynchronization.ON_READ:
        if trainable:
            raise ValueError(
                "Synchronization value can be set to VariableSynchronization.ON_READ only for non-trainable "
                f"variables. You have specified trainable=True and synchronization=VariableSynchronization.ON_READ "
                f"for weight {name!r}: pass trainable=False (or leave trainable out).")
        trainable = False
    elif trainable is None:
        trainable = True
    return bool(trainable), synchronization, aggregation


def _distributing_strategy() -> Any | None:
    """The strategy whose scope distributes variables, in cross-replica context (a layer built inside
    a replica function is that replica's own: its weights stay plain)."""
    if context.current_replica_id() is not None:
        return None
    strategy = context.current_scope_strategy()
    if strategy is None or not strategy.extended.distributes_variables:
        return None
    return strategy


def register_state(layer: torch.nn.Module, name: str, value: torch.Tensor, plain: type,
                   synchronization: VariableSynchronization, aggregation: VariableAggregation) -> None:
    """Register the state weight ``name``: a distributed variable of the scope's strategy (handed whole
    to replicas), else ``plain(value)`` (a strategy that keeps buffers local, or none)."""
    strategy = _distributing_strategy()
    var = None
    if strategy is not None:
        var = strategy.extended.create_variable_from_buffer(layer, name, value, synchronization=synchronization,
                                                           aggregation=aggregation)
    if var is None:
        layer.register_buffer(name, plain(value))
    else:
        var._handed_whole = True
        layer.register_buffer(name, var)
    _note_created(layer._buffers.get(name) if var is None else var)


def hand_variable_whole(value: Any) -> Any:
    """A variable the program made in a strategy's scope (``self.counter = md.Variable(0.)``, keras.io NNCLR's
    ``self.feature_queue = keras.Variable(..., trainable=False)``), kept as a layer's attribute: inside
    ``strategy.run`` the attribute stays the variable, so ``assign*`` in a ``train_step`` follow its aggregation
    as TensorFlow 2.21's do (``tests/keras/tf_2.21_train_step_counter.json``, ``tf_2.21_variable_queue.json``:
    with "none", each replica writes its own copy), instead of the replica's plain tensor, which has no
    ``assign``. A module's own parameters and buffers (``add_weight``'s trainable weights) keep the fast copies."""
    if isinstance(value, DistributedVariable) and not value._module_value:
        value._handed_whole = True
    return value


def is_own_state_alias(layer: torch.nn.Module, name: str, value: Any) -> bool:
    """Whether ``layer.<name> = value`` names one of the layer's own distributed state weights under a
    new attribute (the guide's ``self.total = self.add_weight(...)``, its weight registered as
    'variable'): a plain alias, as it is without a strategy, not a second registration as a torch
    parameter (torch would read the variable to register it, and list it among the parameters)."""
    if not isinstance(value, DistributedVariable):
        return False
    buffers = layer.__dict__.get("_buffers", {})
    if name in buffers or name in layer.__dict__.get("_parameters", {}) or name in layer.__dict__.get("_modules", {}):
        return False
    return any(b is value for b in dict.values(buffers))


# --- shape inference on zeros writes no state ---------------------------------------------------
_GUARDS = threading.local()


def _copies(weight: torch.Tensor) -> tuple:
    return weight.values if isinstance(weight, DistributedVariable) else (weight,)


def _snapshot(weight: torch.Tensor) -> list:
    with torch.no_grad(), DisableTorchFunctionSubclass():
        return [(c, c.detach().clone()) for c in _copies(weight)]


def _note_created(weight: torch.Tensor) -> None:
    """A state weight made while a guard is open (a layer built by its first, inferring call)."""
    stack = getattr(_GUARDS, "stack", None)
    if stack:
        stack[-1].extend(_snapshot(weight))


@contextlib.contextmanager
def untouched_by_inference(layer: torch.nn.Module) -> Iterator[None]:
    """Run a shape-inferring call of ``layer``; afterwards every state weight it had or built holds the
    value it had before (or at creation)."""
    saved: list = []
    for module in layer.modules():
        for buffer in dict.values(module._buffers):
            if buffer is not None:
                saved.extend(_snapshot(buffer))
    stack = _GUARDS.__dict__.setdefault("stack", [])
    stack.append(saved)
    try:
        yield
    finally:
        stack.pop()
        with torch.no_grad(), DisableTorchFunctionSubclass():
            for copy, before in saved:
                if copy.shape == before.shape and not torch.equal(copy, before):
                    copy.copy_(before)


def activation_value(layer, name, value):
    """``layer.activation = None`` on a layer that has one means linear (keras.io's Grad-CAM removes the last
    layer's softmax so): Keras 3's layers skip an activation that is None, md.keras's call theirs."""
    if value is None and name in ("activation", "recurrent_activation") and callable(getattr(layer, name, None)):
        from multidev.keras import activations   # (activations is imported after the layers package)
        return activations.get(None)
    return value
