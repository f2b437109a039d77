"""Running Keras steps on every replica of a strategy (``fit``/``evaluate``/``predict`` under a scope).

Each global batch is split across the replicas exactly as ``experimental_distribute_dataset``
splits it (in order; a partial last batch is spread as TensorFlow spreads it: 4 examples on 2
replicas give [2, 2]; the largest batch seen so far stands for the dataset's batch size). Every
replica gets the step's ``StepInputs`` through its environment (``replica_env().step``): the loss
divides by its global batch size, so the summed gradients equal one device's, and metrics update
that replica's own state, merged exactly afterwards (and summed across workers). Neither the loss
nor the metrics are changed to run a step.
"""

from __future__ import annotations

from typing import Any

import torch

from multidev.data.combine import ZippedDict, ZippedTuple
from multidev.distribute.batch_split import split_element, zipped_parts
from multidev.keras.metrics.base import sum_states_across_workers
from multidev.keras.models.replica_logs import step_logs
from multidev.keras.layers.weights_device import on_device
from multidev.keras.models.step_runner import build_before_step, train_grad_mode
from multidev.keras.step_inputs import StepInputs, check_kind
from multidev.values.distributed import DistributedValues, PerReplica, flatten, local_value


def _batch_size(data: Any) -> int:
    for leaf in flatten(data):
        if isinstance(leaf, torch.Tensor) and leaf.dim() > 0:
            return int(leaf.shape[0])
        if hasattr(leaf, "__len__"):
            return len(leaf)
    raise ValueError("Cannot find the batch dimension of a batch with no array in it.")


class StrategyStepRunner:
    """The step runner ``fit`` uses for a model whose variables belong to ``strategy``."""

    def __init__(self, strategy: Any):
        self.strategy = strategy
        self._largest_batch = 0   # stands for the dataset's batch size: smaller batches are partial
        self._checked: set[int] = set()   # models whose variables were checked (check_variables)

    def run(self, kind: str, step_fn, data, model):
        """Run ``step_fn`` on every replica's slice of ``data``; logs (predictions for 'predict')."""
        check_kind(kind)
        strategy = self.strategy
        extended = strategy.extended
        local = extended.num_local_replicas
        total = local * extended.num_workers
        first = extended.worker_index * local
        zipped = zipped_parts(data) is not None   # a Dataset.zip of two batch sizes: each part cut on its own
        if _is_distributed(data):   # from experimental_distribute_dataset: already one slice per replica
            parts = [local_value(data, r) for r in range(local)]
            zipped = isinstance(data, (ZippedTuple, ZippedDict))   # its slices' parts may match by chance
            global_size = sum(_batch_size(p) for p in parts) * extended.num_workers
        else:
            global_size = _batch_size(data)
            self._largest_batch = max(self._largest_batch, global_size)
            parts = (split_element(data, total, self._largest_batch, extended.num_workers)[first:first + local]
                     if total > 1 else [data])
        devices = extended.torch_devices
        if any(d.type != "cpu" for d in devices):   # each slice copied once: left on the host, the placement mode
            parts = [on_device(p, d) for p, d in zip(parts, devices)]   # copied it at every op reading it
        ensure_built(model, strategy, parts[0])
        if id(model) not in self._checked:
            check_variables(model, strategy)
            self._checked.add(id(model))
        stores = () if kind == "predict" else tuple({} for _ in range(local))   # predict updates no metric
        inputs = StepInputs(kind, global_size, stores, zipped=zipped)
        with strategy.scope(), train_grad_mode(kind):
            outputs = extended.call_for_each_replica(step_fn, (PerReplica(parts) if local > 1 else parts[0],), {},
                                                      step=inputs)
        if kind == "predict":
            return strategy.gather(outputs, axis=0) if total > 1 else outputs
        merged = self._merge_metrics(model, inputs.metric_states)
        return step_logs(model, merged, outputs, extended)

    def _merge_metrics(self, model, stores: tuple[dict, ...]) -> list:
        """Fold every metric the replicas updated into its own state: ``model.metrics``, then any
        other a custom step updated (a tracker left out of a ``metrics`` property still counts, as
        on one device), in the order the replicas met them."""
        extended = self.strategy.extended
        metrics = list(model.metrics)
        listed = set(map(id, metrics))
        for store in stores:
            for m in store:
                if id(m) not in listed:
                    listed.add(id(m))
                    metrics.append(m)
        if extended.num_workers == 1:
            for m in metrics:
                states = [s[m] for s in stores if m in s]
                if states:
                    m.merge_state(states)
            return metrics
        # Across workers: sum this step's per-metric states, one flat all-reduce, then merge.
        deltas = [m.summed_state([s[m] for s in stores if m in s]) for m in metrics]
        sum_states_across_workers(extended, deltas)
        for m, d in zip(metrics, deltas):
            m.merge_state([d])
        return metrics


def _is_distributed(data: Any) -> bool:
    return any(isinstance(leaf, DistributedValues) for leaf in flatten(data))


def ensure_built(model, strategy, data) -> None:
    """Create a lazily-built model's weights in cross-replica context, under the strategy's scope,
    so they become distributed variables (building inside a replica would make local ones)."""
    build_before_step(model, data, strategy.scope())


def check_variables(model, strategy) -> None:
    """Refuse trainable weights made outside ``strategy``'s scope, as TensorFlow does: every replica
    would read and update one plain tensor with its own, unsummed gradient.

    Raises:
        ValueError: naming the first such weight and the fix.
    """
    extended = strategy.extended
    if not extended.distributes_variables:
        return
    for weight in model.trainable_weights:
        if not extended.variable_created_in_scope(weight):
            name = next((n for n, p in model.named_parameters() if p is weight), tuple(weight.shape))
            raise ValueError(
                f"Variable ({name!r}) was not created in the distribution strategy scope of ({strategy!r}). It is "
                "most likely because some layers, model, or optimizer was being created outside the distribution "
                "strategy scope. Create (and build) the model and its layers inside `with strategy.scope():`, "
                "then compile and fit.")
