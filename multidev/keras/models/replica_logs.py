"""The logs of one Keras step run on every replica: what ``fit``'s History, the progress bar and the
callbacks' ``logs`` show for the values a ``train_step``/``test_step`` returned.

Two kinds of value, as TensorFlow 2.21 reports them (tests/keras/tf_2.21_replica_logs.json):

* a metric's ``result()`` (under the metric's name or another): the metric once every replica's part
  of the step is merged, exactly what one device reports (tf-keras 2 does the same; Keras 3 on
  TensorFlow averages the replicas' own results, which differs from one device when the replicas
  saw different counts, so md.keras keeps the exact figure);
* any other value (a raw loss tensor, ``{"d_loss": d_loss}`` as keras.io's GANs return): reduced
  across the replicas by ``model.distribute_reduction_method``. Its default ``"auto"`` is Keras 3's
  (TF 2.21's ``tf.keras``): the mean over the replicas, so a per-replica mean loss of equal halves
  reports one device's value; ``"sum"`` is tf-keras 2's default (its ``"auto"``), ``"first"`` takes
  replica 0's value.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch

from multidev.keras.metrics.base import result_of, sum_states_across_workers
from multidev.values.distributed import local_value

REDUCTIONS = ("auto", "first", "mean", "sum")


def check_reduction(value: Any) -> str:
    """``value`` if it is a reduction ``reduce_per_replica`` accepts for a step's logs.

    Raises:
        ValueError: naming the value and the valid choices.
    """
    if value not in REDUCTIONS:
        raise ValueError(f'`distribute_reduction_method` must be one of "first", "mean", "sum", or "auto". '
                         f"Received: distribute_reduction_method={value!r}. \"auto\" (the default) averages the "
                         'replicas\' values as TensorFlow 2.21\'s tf.keras (Keras 3) does; "sum" is tf-keras 2\'s.')
    return value


def step_logs(model, metrics: list, outputs: Any, extended) -> dict:
    """The step's logs from its per-replica ``outputs`` (replica 0's structure, keys in its order);
    a step that returned no dict gets every metric's result."""
    local = extended.num_local_replicas
    returns = [local_value(outputs, r) for r in range(local)] if local > 1 else [outputs]
    if not isinstance(returns[0], dict):
        return model.get_metrics_result()
    merged = {m.name: m.result() for m in metrics}
    flats = [_flat(r) for r in returns]
    logs, raw = {}, []
    for key, value in flats[0].items():
        metric = result_of(value)
        if metric is not None:
            logs[key] = merged[key] if key in merged and result_of(merged[key]) is metric else metric.result()
        elif key in merged and not isinstance(value, torch.Tensor):
            logs[key] = merged[key]   # (a metric's result as a number: the merged figure)
        else:   # a value under a metric's name that is no metric's result ({"loss": loss}: the loss itself)
            logs[key] = None
            raw.append(key)
    method = getattr(model, "distribute_reduction_method", "auto")
    reduced = _reduce([[f.get(k, flats[0][k]) for f in flats] for k in raw], extended, method)
    logs.update(zip(raw, reduced))
    return logs


def _flat(returned: dict) -> dict:
    flat = {}
    for key, value in returned.items():
        flat.update(value if isinstance(value, dict) else {key: value})   # compile_metrics: its entries
    return flat


def _reduce(columns: list[list], extended, method: str) -> list:
    """Each column (one key's value on every local replica) reduced across all the replicas of all
    the workers; a value that is no number (or whose shape differs between replicas) is replica 0's."""
    total = extended.num_local_replicas * extended.num_workers
    if method == "first" or total == 1:
        return [column[0] for column in columns]
    numeric = [i for i, column in enumerate(columns) if _stackable(column)]
    sums = [torch.stack([_tensor(v, column[0]) for v in column]).double().sum(0) for column in
            (columns[i] for i in numeric)]
    sum_states_across_workers(extended, [{i: s for i, s in zip(numeric, sums)}])
    out = [column[0] for column in columns]
    for i, s in zip(numeric, sums):
        first = _tensor(columns[i][0], columns[i][0])
        value = s if method == "sum" else s / total
        if not first.is_floating_point():
            value = torch.trunc(value)   # an integer mean stays an integer, as tf.reduce_mean's
        out[i] = value.to(first.dtype)
    return out


def _tensor(value, first) -> torch.Tensor:
    device = first.device if isinstance(first, torch.Tensor) else None
    if isinstance(value, torch.Tensor):
        return value.detach().to(device)
    return torch.as_tensor(np.asarray(value), device=device)


def _stackable(column: list) -> bool:
    """Numbers or numeric tensors of one shape on every replica."""
    shapes = set()
    for v in column:
        if isinstance(v, torch.Tensor):
            if v.dtype == torch.bool or v.is_complex():
                return False
            shapes.add(tuple(v.shape))
        elif isinstance(v, (numbers.Real, np.number)) and not isinstance(v, (bool, np.bool_)):
            shapes.add(())
        else:
            return False
    return len(shapes) == 1
