"""Keras 3's own ``fit``/``evaluate``/``predict`` on a model distributed by ``MirroredStrategy``.

Keras runs its loop (data adapter, callbacks, progress bar, history) in the caller's thread; each
step function here splits the global batch across the replicas (as ``experimental_distribute_dataset``
splits it), runs the replicas' halves with ``strategy.run`` and returns the metrics read in
cross-replica context (summed over every replica's examples). Each replica's loss is its mean
scaled by its share of the global batch, so the summed gradients are the global batch's, exactly,
uneven last batch included. ``predict`` gathers every replica's outputs (all workers') in order;
shuffled ``fit`` across workers starts each epoch from the chief's RNG state. Only public Keras
names here, plus ``keras3.loss_tracker``, ``Layer._call_has_training_arg`` (whether Keras's steps pass ``training``)
and ``Model._compute_loss`` (Keras's own steps call it: it drops
``training`` for a ``compute_loss`` override written without it, as keras.io's knowledge distillation's).
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from multidev._core.enums import ReduceOp
from multidev.distribute.batch_split import split_element
from multidev.integrations import keras3_batch_norm, keras3_dropout, keras3_loss_scale
from multidev.values import context
from multidev.values.distributed import PerReplica


def _leading(structure: Any) -> int:
    leaves = [t for t in _flatten(structure) if t is not None]
    return int(leaves[0].shape[0])


def _flatten(structure: Any) -> list:
    if isinstance(structure, (list, tuple)):
        return [leaf for item in structure for leaf in _flatten(item)]
    if isinstance(structure, dict):
        return [leaf for key in sorted(structure) for leaf in _flatten(structure[key])]
    return [structure]


class _Splitter:
    """Splits each global batch into every replica's slice (all workers') and keeps this worker's;
    the first (largest) batch is the full size. Every worker reads the same global batches."""

    def __init__(self, strategy: Any):
        self.strategy = strategy
        self.full = 0
        self.sizes: list[int] = []   # the last batch's slice sizes, every replica's (all workers')

    def __call__(self, batch: Any) -> tuple[PerReplica, int]:
        size = _leading(batch)
        self.full = max(self.full, size)
        parts = _split(batch, self.strategy.num_replicas_in_sync, self.full, self.strategy.extended.num_workers)
        self.sizes = [_leading(p) for p in parts]
        extended = self.strategy.extended
        offset = extended.replica_offset
        return PerReplica(parts[offset:offset + extended.num_local_replicas]), size


def _split(batch: Any, replicas: int, full: int, workers: int) -> list:
    """``split_element`` keeping a tuple's ``None`` entries (``train_on_batch`` passes ``(x, y, None)``, and a
    custom step unpacks it as on one device)."""
    if not isinstance(batch, tuple) or all(item is not None for item in batch):
        return split_element(batch, replicas, full, workers)
    kept = [i for i, item in enumerate(batch) if item is not None]
    parts = split_element(tuple(batch[i] for i in kept), replicas, full, workers)
    return [tuple(part[kept.index(i)] if i in kept else None for i in range(len(batch))) for part in parts]


def _call(model: Any, x: Any, training: bool) -> Any:
    """The model on ``x`` as Keras's own steps call it: with ``training`` only when its ``call`` takes it. (A
    ``call(self, input_node_indices)``, keras.io's GNN, gets no flag, so Keras 3 runs its nested BatchNormalization
    in inference mode in ``fit`` on one device; passing ``training=True`` trained it on replicas.)"""
    return model(x, training=training) if model._call_has_training_arg else model(x)


def _in_keras_step(replica_step: Any) -> Any:
    """``replica_step`` with Keras's losses left unscaled (``keras3_loss_scale``): this step weighs them."""
    def run(*args: Any) -> Any:
        with keras3_loss_scale.keras_step():
            return replica_step(*args)
    return run


def train_function(keras: Any, model: Any, strategy: Any, loss_tracker: Any) -> Any:
    """Keras's ``train_function(data)`` for ``model`` on ``strategy``'s replicas."""
    split = _Splitter(strategy)

    def replica_step(local: Any, global_size: int, weights: list, sizes: list) -> None:
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(local)
        values = [v.value for v in weights]  # this replica's copies
        for t in values:
            t.grad = None
        size = _leading(x)
        if size == 0:  # an empty slice of a small last batch still joins the gradient sum
            grads = [torch.zeros_like(t) for t in values]
        else:
            with keras3_dropout.batch_slice(sizes, context.current_replica_context()._global_replica_id):
                y_pred = _call(model, x, training=True)
            with keras3_loss_scale.batch_share(size / global_size):
                loss = model._compute_loss(x, y, y_pred, sample_weight, training=True)   # Keras's step calls it so
            loss_tracker.update_state(loss, sample_weight=size)
            if weights:   # (a frozen model: Keras's step only warns)
                model.optimizer.scale_loss(loss * (size / global_size)).backward()
            grads = [t.grad for t in values]
        if weights:
            with torch.no_grad():
                model.optimizer.apply(grads, weights)
        if size:
            model.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    # Wrapped once: the strategy's first-run checks (shared modules, free tensors) watch a step function's
    # first run only, and a closure made anew every step would be watched at every step.
    keras_step = _in_keras_step(replica_step)

    def step(data: Any) -> dict:
        parts, size = split(data[0])
        if 0 in split.sizes:   # a replica without examples runs no forward pass (4 rows on 3: [2, 2, 0])
            keras3_batch_norm.refuse_empty_slice(model, size, split.sizes)
        # The trainable variables once a step, in the caller (Keras walks every layer to list them).
        weights = model.trainable_variables
        if not weights:
            warnings.warn("The model does not have any trainable weights.")   # Keras's torch train_step's words
        strategy.run(keras_step, args=(parts, size, weights, split.sizes))
        return model.get_metrics_result()

    return step


def test_function(keras: Any, model: Any, strategy: Any, loss_tracker: Any) -> Any:
    """Keras's ``test_function(data)``: every replica evaluates its slice; metrics count all of them."""
    split = _Splitter(strategy)

    def replica_step(local: Any) -> None:
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(local)
        size = _leading(x)
        if size == 0:
            return
        with keras3_dropout.batch_slice(split.sizes, context.current_replica_context()._global_replica_id):
            y_pred = _call(model, x, training=False)   # (a VAE's Sampling draws in evaluate too: keras3_random)
        with keras3_loss_scale.batch_share(size / sum(split.sizes)):
            loss = model._compute_loss(x, y, y_pred, sample_weight, training=False)
        loss_tracker.update_state(loss, sample_weight=size)
        model.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    keras_step = _in_keras_step(replica_step)   # wrapped once, as train_function's

    def step(data: Any) -> dict:
        parts, _ = split(data[0])
        with torch.no_grad():
            strategy.run(keras_step, args=(parts,))
        return model.get_metrics_result()

    return step


def predict_function(keras: Any, model: Any, strategy: Any) -> Any:
    """Keras's ``predict_function(data)``: every replica (of every worker) predicts its slice of the global
    batch and the slices' outputs are gathered in replica order, so each worker returns the whole
    batch's outputs in order, as one device does (``MultiWorkerMirroredStrategy`` included)."""
    split = _Splitter(strategy)

    def replica_step(local: Any) -> Any:
        with keras3_dropout.batch_slice(split.sizes, context.current_replica_context()._global_replica_id):
            return model.predict_step(local)  # Keras's or the model's own; an empty slice gives an empty output

    def step(data: Any) -> Any:
        parts, _ = split(data[0])
        with torch.no_grad():
            outputs = strategy.run(replica_step, args=(parts,))
        return strategy.gather(outputs, axis=0)

    return step


def same_shuffle_callback(keras: Any, strategy: Any) -> Any:
    """A Keras callback giving every worker the chief's torch RNG state at each epoch's start: Keras's
    shuffle (torch's samplers) then draws the same order on every worker, so all read the same global
    batches and keep their replicas' slices (md.keras syncs its shuffle the same way)."""

    class SameShuffleAcrossWorkers(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            torch.set_rng_state(chief_rng_state(strategy))

    return SameShuffleAcrossWorkers()


def chief_rng_state(strategy: Any) -> torch.Tensor:
    """The first replica's (the chief's) ``torch.get_rng_state()``, on every worker: an all-reduce where
    only replica 0 contributes (public strategy API only)."""
    state = torch.get_rng_state().to(torch.int64)

    def pick(s: torch.Tensor) -> torch.Tensor:
        ctx = context.current_replica_context()
        mine = s if ctx._global_replica_id == 0 else torch.zeros_like(s)
        return ctx.all_reduce(ReduceOp.SUM, mine)

    summed = strategy.experimental_local_results(strategy.run(pick, args=(state,)))[0]
    return summed.to(torch.uint8)
