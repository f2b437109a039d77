"""Keras's ``learning_rate`` variable of md.keras's optimizers: a plain float32 ``md.Variable`` on the host,
never a distributed one (every replica reads the same rate), assigned in a replica as TensorFlow assigns a
mirrored variable aggregated ONLY_FIRST_REPLICA (replica 0's value, once)."""

from __future__ import annotations

import torch

from multidev._core.enums import VariableAggregation, VariableSynchronization
from multidev.distribute import once_per_step
from multidev.keras.optimizers import schedules
from multidev.values.variables import Variable


def _is_schedule(value) -> bool:
    """A LearningRateSchedule or another callable giving the rate (Keras accepts both)."""
    return isinstance(value, schedules.LearningRateSchedule) or (callable(value) and not isinstance(value, torch.Tensor))


def _float_lr(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError) as err:
        raise ValueError("Argument `learning_rate` should be a float, a LearningRateSchedule or a callable "
                         f"returning the learning rate. Received: learning_rate={value!r}") from err


class _LearningRate(Variable):
    """Keras's ``learning_rate`` variable: a host float32 scalar. It pickles by value (a function
    scheduled on parameter-server workers captures the optimizer; each worker gets a copy)."""

    def __reduce_ex__(self, protocol):
        return _lr_value, (torch.Tensor.item(self),)

    def _update(self, op, value):
        """In a replica of several local ones, TensorFlow's rule for the learning rate, a mirrored variable
        aggregated ONLY_FIRST_REPLICA: ``assign`` / ``assign_add`` / ``assign_sub`` meet (every replica calls
        them, as TensorFlow's merge_call) and apply replica 0's value once. A custom ``train_step``'s
        ``self.optimizer.learning_rate.assign(lr * 0.5)`` halved the one host variable once per replica."""
        env = once_per_step.several_local_replicas()
        if env is None:
            return super()._update(op, value)
        value = value.detach() if isinstance(value, torch.Tensor) else value
        once_per_step.once(env, ("learning_rate", op, id(self)), value,
                           lambda every: Variable._update(self, op, every[0]))
        return self

    def __deepcopy__(self, memo):
        return _lr_value(torch.Tensor.item(self))


def _lr_value(value):
    """A schedule or callable as given; a number becomes Keras's float32 ``learning_rate`` variable."""
    if _is_schedule(value):
        return value
    data = torch.tensor(_float_lr(value), dtype=torch.float32, device="cpu")   # even in md.device('/GPU:0')
    return _LearningRate._from_tensor(data, trainable=False, name="learning_rate",
                                 synchronization=VariableSynchronization.from_value(None),
                                 aggregation=VariableAggregation.from_value("only_first_replica"))
