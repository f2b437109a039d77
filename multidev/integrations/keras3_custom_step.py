"""A Keras 3 model's own ``train_step``/``test_step`` run by ``fit``/``evaluate`` on every replica.

Keras's torch-backend guide writes a custom step as one device sees it: ``self.zero_grad()``, a loss
(``self.compute_loss(...)`` or ``self.loss_fn(y, y_pred)``: a mean over the batch), ``loss.backward()``,
``optimizer.apply([v.value.grad ...])``, metric updates, a dict of results. On N replicas every replica
runs that step on its slice of the global batch, and three things make the N slices one batch again:

- **gradients**: ``optimizer.apply`` inside the step weights the replica's gradients by its share of the
  global batch (``size_r / global_size``) before they are summed across replicas (``keras3._apply``),
  so a mean loss's summed gradient is the global batch's, exactly, uneven last batch included
  (TensorFlow's Keras scales the loss by ``1 / num_replicas``: the same on even splits);
- **scalar metric updates**: ``Mean``/``Sum.update_state(scalar)`` without a ``sample_weight`` (the loss
  trackers of the guides, a step counter) is weighted by the same share, so one step counts once, as on one
  device (``keras3_loss_scale.weighted_mean_update``); per-example updates (``metric.update_state(y, y_pred)``)
  count every replica's examples as they are;
- **the returned logs**: a value that is a metric's ``result()`` is read again in cross-replica context
  (every replica's state reduced); another floating value is the share-weighted sum of the replicas'.

A global batch with fewer examples than replicas (an empty slice) is refused before the first step when
``fit`` is given arrays, and at that step otherwise: a custom step cannot be run on no examples.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any

import torch
from torch.optim import optimizer as torch_optimizer

from multidev.distribute.batch_split import split_sizes
from multidev.integrations import keras3_batch_norm, keras3_dropout
from multidev.integrations.keras3_fit import _leading, _Splitter
from multidev.values import context

def _state() -> "StepState | None":
    """The custom step running on the calling replica (``replica_env().step``), or None."""
    env = context.replica_env()
    step = None if env is None else env.step
    return step if type(step) is StepState else None


def share() -> float | None:
    """The calling replica's share of the global batch inside a custom step run here (else None)."""
    state = _state()
    return None if state is None else state.shares[context.replica_env().replica_id]


def overrides(keras: Any, model: Any, name: str) -> bool:
    """Whether ``model``'s class overrides Keras's ``train_step``/``test_step``."""
    return getattr(type(model), name) is not getattr(keras.Model, name)


def check_batches(keras: Any, original: Any, model: Any, strategy: Any, args: tuple, kwargs: dict) -> None:
    """Before the first step: refuse arrays whose last batch would leave a replica without examples in a
    custom step (``fit``'s training arrays for a ``train_step``, its validation arrays for a ``test_step``)."""
    try:
        arguments = inspect.signature(original).bind(model, *args, **kwargs).arguments
    except TypeError:
        return  # Keras reports the bad call itself
    if arguments.get("validation_split"):
        return  # the split happens inside Keras: checked at each step
    batch = arguments.get("batch_size") or 32  # Keras's default
    step = "train_step" if "validation_data" in inspect.signature(original).parameters else "test_step"
    if overrides(keras, model, step):
        _check_array(model, strategy, arguments.get("x"), batch)
    validation = arguments.get("validation_data")
    if step == "train_step" and isinstance(validation, (tuple, list)) and overrides(keras, model, "test_step"):
        _check_array(model, strategy, validation[0], arguments.get("validation_batch_size") or batch)


def _check_array(model: Any, strategy: Any, x: Any, batch: int) -> None:
    replicas = strategy.num_replicas_in_sync
    if not hasattr(x, "shape") or not len(x.shape):
        return  # a dataset, generator or structure: checked at each step
    size, batch = int(x.shape[0]), int(batch)
    for rows in {min(size, batch), size % batch} - {0}:   # a full batch and the last one, cut as TF cuts them
        sizes = split_sizes(rows, replicas, batch, strategy.extended.num_workers)
        if 0 in sizes:
            raise ValueError(
                f"{type(model).__name__} overrides its train_step/test_step and would get "
                f"{'a last batch' if rows == size % batch else 'batches'} of {rows} "
                f"example(s) ({size} examples in batches of {batch}) on {replicas} replicas, cut as TensorFlow cuts "
                f"it ({sizes}): every replica needs at least one. Choose a batch_size every replica gets rows of "
                "(slices of ceil(batch / replicas) rows), or drop the remainder."
            )


def refuse_torch_optim(optimizer: Any, args: tuple, kwargs: dict) -> None:
    """``torch.optim`` step pre-hook while a custom step runs (``step_function``): a torch optimizer stepped inside a Keras model's own step on
    several replicas is refused (multidev sums its gradients before this hook could weight them by the
    replica's share, so a mean loss would train with N times the gradient); a Keras optimizer is weighted."""
    if share() is not None:
        raise NotImplementedError(
            f"torch.optim.{type(optimizer).__name__}.step() inside a Keras model's own train_step on several "
            "replicas: its gradients would be the sum of every replica's mean loss gradient, not the global "
            "batch's. Use a Keras optimizer (self.optimizer.apply(gradients, trainable_weights)), or train with "
            "a custom loop (strategy.run) whose loss is scaled by the global batch size."
        )


class ResultTracker:
    """Remembers which metric's ``result()`` produced which returned object (the metrics' own ``result``
    wrapped per instance while ``fit`` runs, restored afterwards)."""

    def __init__(self) -> None:
        self.wrapped: dict[int, Any] = {}

    def track(self, model: Any) -> None:
        for metric in model.metrics:
            if id(metric) not in self.wrapped and not hasattr(metric.__dict__.get("result"), "records"):
                self.wrapped[id(metric)] = metric  # (fit's validation evaluate finds fit's wrappers)
                metric.result = self._recording(metric, metric.result)

    @staticmethod
    def _recording(metric: Any, original: Any) -> Any:
        def result():
            out = original()
            state = _state()
            if state is not None:
                state.records[context.replica_env().replica_id][id(out)] = (metric, out)  # kept alive: ids stay unique
            return out
        result.records = True
        return result

    def restore(self) -> None:
        for metric in self.wrapped.values():
            metric.__dict__.pop("result", None)
        self.wrapped.clear()


def _combine(values: list, shares: list, tags: dict, first: Any) -> Any:
    """The cross-replica value of one returned entry (replica 0's ``first``)."""
    metric = tags.get(id(first))
    if metric is not None:
        return metric.result()
    if isinstance(first, dict):
        return {k: _combine([v[k] for v in values], shares, tags, first[k]) for k in first}
    if isinstance(first, (list, tuple)) and not hasattr(first, "_fields"):
        return type(first)(_combine([v[i] for v in values], shares, tags, first[i]) for i in range(len(first)))
    if isinstance(first, torch.Tensor) and first.is_floating_point():
        with torch.no_grad():
            return sum(s * v.detach() for s, v in zip(shares, values))
    return first


class StepState:
    """One custom step's per-replica inputs and outputs, handed to every replica as ``replica_env().step``
    (the per-call seam of ``extended.call_for_each_replica``): each replica's share of the global batch,
    and what each returned and which metric's ``result()`` made it (written by that replica alone)."""

    def __init__(self, shares: list):
        self.shares = shares
        self.outputs: list = [None] * len(shares)
        self.records: list[dict] = [{} for _ in shares]   # per replica: id(result) -> (metric, result)
        self.tags: dict = {}


def step_function(model: Any, strategy: Any, name: str, tracker: ResultTracker) -> Any:
    """Keras's ``train_function``/``test_function(data)`` running ``model.<name>`` on every replica."""
    split = _Splitter(strategy)
    method = getattr(model, name)

    def replica_step(parts: Any) -> None:
        state = context.replica_env().step
        r = context.replica_env().replica_id
        with keras3_dropout.batch_slice(split.sizes, context.current_replica_context()._global_replica_id):
            state.outputs[r] = method(parts)
        if r == 0:
            state.tags.update({key: metric for key, (metric, _) in state.records[0].items()})

    def step(data: Any) -> Any:
        parts, size = split(data[0])
        sizes = [_leading(p) for p in parts.values]
        if min(sizes) == 0:
            raise ValueError(
                f"{type(model).__name__}.{name} (a custom step) on {strategy.num_replicas_in_sync} replicas got a "
                f"global batch of {size} example(s), cut as TensorFlow cuts it ({sizes}): every replica needs at "
                "least one. Use a batch size every replica gets rows of (slices of ceil(batch / replicas) rows), or "
                f"drop the remainder; train_on_batch: pass at least {strategy.num_replicas_in_sync} examples."
            )
        if name == "train_step" and len(set(sizes)) > 1:
            keras3_batch_norm.refuse_uneven_custom_step(model, sizes)
        tracker.track(model)
        state = StepState([n / size for n in sizes])
        # The refusal of torch.optim steps lives only while the model's own step runs on the replicas.
        refusal = torch_optimizer.register_optimizer_step_pre_hook(refuse_torch_optim)
        try:
            with torch.no_grad() if name == "test_step" else contextlib.nullcontext(), strategy.scope():
                strategy.extended.call_for_each_replica(replica_step, (parts,), step=state)
        finally:
            refusal.remove()
        return _combine(state.outputs, state.shares, state.tags, state.outputs[0])

    return step
