"""``fit`` for models whose variables live on parameter servers (ParameterServerStrategy).

As in TensorFlow: the input is a ``DatasetCreator`` (or a zero/one-argument dataset function) that
every worker runs to build its own pipeline, ``steps_per_epoch`` is required, and each training
step is scheduled on a free worker through the strategy's ``ClusterCoordinator``. The metrics
(loss tracker and compiled metrics) are built on the coordinator in scope, so their state lives on
the ps: each epoch resets them, every worker's steps add to them, and the epoch logs are their
values after the epoch's last step (over all workers). Batch-level callbacks are not called (the
steps run elsewhere, asynchronously), but the progress bar advances as steps finish. Validation, if
asked for, runs on the coordinator with the current weights.
"""

from __future__ import annotations

from typing import Any

import torch

from multidev.distribute.parameter_server.strategy import active_strategy
from multidev.distribute.parameter_server.variables import PSVariable
from multidev.keras.callbacks.base import CallbackList
from multidev.keras.callbacks.progbar import ProgbarLogger
from multidev.keras.utils.dataset_creator import DatasetCreator


def applies(model: Any, x: Any) -> bool:
    """True when ``model``'s variables live on parameter servers (or it has none yet and x is a DatasetCreator
    under an active ParameterServerStrategy)."""
    if any(isinstance(p, PSVariable) for p in model.parameters()):
        return True
    return isinstance(x, DatasetCreator) and active_strategy() is not None


def local_input(x: Any) -> Any:
    """Without parameter servers a DatasetCreator is called once, here, for one input pipeline."""
    return x() if isinstance(x, DatasetCreator) else x


def as_creator(x: Any) -> DatasetCreator:
    if isinstance(x, DatasetCreator):
        return x
    if callable(x):
        return DatasetCreator(x)
    raise ValueError(
        f"With ParameterServerStrategy, `fit` takes its input as a dataset function that each worker runs: "
        f"pass md.keras.utils.experimental.DatasetCreator(dataset_fn) (got {type(x).__name__})."
    )


def _ensure_built(model: Any, creator: DatasetCreator, strategy: Any) -> None:
    """Build a lazily built model on the coordinator, in scope, from one batch of the input."""
    if any(True for _ in model.parameters()):
        return
    from multidev.keras.models.data_adapter import unpack_x_y_sample_weight

    batch = next(iter(creator()))
    x, _, _ = unpack_x_y_sample_weight(tuple(batch) if isinstance(batch, list) else batch)
    with strategy.scope(), torch.no_grad():
        model(x)


def _build_metrics(model: Any, creator: DatasetCreator, strategy: Any) -> None:
    """Build the compiled metrics on the coordinator, in scope (state on the ps), from one batch."""
    container = getattr(model, "compiled_metrics", None)
    if container is None or container.built:
        return
    from multidev.keras.models.data_adapter import unpack_x_y_sample_weight

    batch = next(iter(creator()))
    x, y, _ = unpack_x_y_sample_weight(tuple(batch) if isinstance(batch, list) else batch)
    if y is None:
        return
    with strategy.scope(), torch.no_grad():
        container.update_state(y, model(x))
    model.reset_metrics()


def _epoch_logs(model: Any, last_step: dict) -> dict:
    """The last step's logs, with metrics kept on the ps read there (every worker's updates); a metric
    created outside the strategy's scope lives on each worker, so its last step's value stays."""
    logs = dict(last_step)
    for metric in model.metrics:
        if metric.name in logs and metric.variables and all(isinstance(v, PSVariable) for v in metric.variables):
            logs[metric.name] = float(metric.result())
    return logs


def _resume(model: Any, initial_epoch: int) -> tuple[int, int]:
    """``(first epoch, steps already done in it)`` from a BackupAndRestore backup (the input position
    is not restored: each worker's pipeline starts afresh)."""
    point, model._resume_point = model._resume_point, None
    if point is None:
        return initial_epoch, 0
    return max(initial_epoch, point.epoch), point.step


def _advance_progbar(cbs: CallbackList, results: list, first_step: int) -> None:
    """Move the progress bar as the epoch's scheduled steps finish (in order). As in TensorFlow, only
    the built-in progress bar hears of single steps; user callbacks' batch hooks are not called."""
    bars = [cb for cb in cbs.callbacks if isinstance(cb, ProgbarLogger)]
    if not bars:
        return
    for i, result in enumerate(results):
        result._wait()                   # an error is raised by join(), as without a bar
        for bar in bars:
            bar.on_train_batch_end(first_step + i, {})


def _train_function(model: Any):
    def train_function(iterator):
        logs = model.train_step(next(iterator))
        return {k: float(v) for k, v in logs.items()}
    return train_function


def fit(model: Any, x: Any, *, epochs: int, steps_per_epoch: int | None, callbacks: Any, verbose: Any,
        validation_data: Any, initial_epoch: int) -> Any:
    """Train ``model`` asynchronously on the workers; returns the History callback."""
    from multidev.distribute.coordinator import ClusterCoordinator

    strategy = active_strategy()
    if strategy is None:
        raise RuntimeError("This model's variables live on parameter servers but no ParameterServerStrategy "
                           "is connected in this process (was it shut down?).")
    if steps_per_epoch is None or steps_per_epoch <= 0:
        raise ValueError(
            f"When using ParameterServerStrategy (or a DatasetCreator), `steps_per_epoch` must be a positive "
            f"integer; got {steps_per_epoch!r}."
        )
    creator = as_creator(x)
    _ensure_built(model, creator, strategy)
    _build_metrics(model, creator, strategy)
    coordinator = ClusterCoordinator(strategy)
    dataset = coordinator.create_per_worker_dataset(
        lambda: strategy.distribute_datasets_from_function(creator))
    iterator = iter(dataset)
    verbose = 1 if verbose == "auto" else int(verbose)
    cbs = callbacks if isinstance(callbacks, CallbackList) else CallbackList(
        callbacks, add_history=True, add_progbar=verbose != 0, model=model, verbose=verbose, epochs=epochs,
        steps=steps_per_epoch)
    train_function = _train_function(model)
    model.stop_training = False
    cbs.on_train_begin()
    initial_epoch, first_step = _resume(model, initial_epoch)
    strategy.extended.push_stale()   # weights restored by callbacks go to the ps
    logs: dict = {}
    for epoch in range(initial_epoch, epochs):
        cbs.on_epoch_begin(epoch)
        model.reset_metrics()          # on the ps (pushed before the first step is scheduled)
        steps = steps_per_epoch - (first_step if epoch == initial_epoch else 0)
        results = [coordinator.schedule(train_function, args=(iterator,)) for _ in range(max(steps, 1))]
        _advance_progbar(cbs, results, steps_per_epoch - len(results))
        coordinator.join()
        logs = _epoch_logs(model, results[-1].fetch())
        if validation_data is not None:
            val = model.evaluate(validation_data, verbose=0, return_dict=True)
            logs.update({f"val_{k}": v for k, v in val.items()})
        cbs.on_epoch_end(epoch, logs)
        if model.stop_training:
            break
    cbs.on_train_end(logs)
    return cbs.history


__all__ = ["applies", "fit", "as_creator", "local_input"]
