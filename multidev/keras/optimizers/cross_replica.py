"""``apply_gradients`` in cross-replica context: a custom loop without ``strategy.run`` over a model
made in a strategy's scope (TensorFlow's custom training walkthrough with the two added lines).

TensorFlow 2.21 (tf.keras 2 and Keras 3) applies the one set of gradients to every copy, so training is
one device's. Here every local replica takes the step with those gradients as the step's already-summed
ones (clipped before, on the whole gradient, as on one device): the update plan applies them with each
variable's slots where it keeps them, so the copies stay equal. Several workers each hold their own
gradients, which would leave the workers' copies apart: refused. So is a call inside ``merge_call``
(there the replicas' steps, which meet each other, would run one after another in one thread).
"""

from __future__ import annotations

from multidev.distribute.replica_context import merge_call_strategy
from multidev.values.gradients import SummedGrads
from multidev.values.variables import local_view


def apply_on_every_replica(optimizer, strategy, grads, variables, lr) -> None:
    """Run ``optimizer``'s step with ``grads`` (the whole gradient) on every replica of ``strategy``."""
    if merge_call_strategy() is not None:
        raise RuntimeError(
            f"{type(optimizer).__name__}.apply_gradients() cannot be called inside merge_call: call it in the "
            "replica function (inside strategy.run it sums every replica's gradients itself), or pass the "
            "reduced gradients out of merge_call and apply them there.")
    if strategy.extended.num_workers > 1:
        raise RuntimeError(
            f"{type(optimizer).__name__}.apply_gradients() over variables created in {type(strategy).__name__}"
            ".scope() cannot be called in cross-replica context on several workers (each worker's gradients "
            "would update its copies only): call it inside strategy.run(train_step, ...) so every replica's "
            "gradients are summed.")

    def step(*tensors):
        moved = tuple(None if g is None else g.to(local_view(v).device) for g, v in zip(tensors, variables))
        optimizer._step(SummedGrads(moved), variables, lr, own=False)

    strategy.run(step, args=tuple(grads.tensors))
