"""Step runners: how ``fit``/``evaluate``/``predict`` execute one step function on one batch.

The loops in ``Trainer`` never call ``train_step`` directly; they call
``model._step_runner.run(kind, step_fn, data, model)`` with ``kind`` 'train', 'test' or 'predict'
(the :class:`StepRunner` seam). ``LocalStepRunner`` moves the batch to the model's device and calls
the step. On a strategy ``StrategyStepRunner`` (strategy_runner.py) splits the global batch, runs
``step_fn`` in every replica with the step's ``StepInputs`` and returns logs from merged metric
states. Step functions are self-contained: test/predict steps enter ``torch.no_grad()``
themselves, because grad mode is per thread.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

import torch

from multidev.keras.layers.keras_tensor import map_structure
from multidev.keras.step_inputs import check_kind


class StepRunner(Protocol):
    """Runs one step of ``kind`` ('train', 'test', 'predict') on one batch; returns the logs (the
    predictions for 'predict')."""

    def run(self, kind: str, step_fn: Callable[[Any], Any], data: Any, model: Any) -> Any: ...


def model_device(model) -> torch.device | None:
    """Device of the model's first weight (None for a weightless model)."""
    for p in model.parameters():
        return p.device
    for b in model.buffers():
        return b.device
    return None


def move_to_device(data, device):
    """Move every tensor in ``data`` to ``device`` (non-blocking from pinned memory)."""
    if device is None:
        return data
    return map_structure(lambda t: t.to(device, non_blocking=True) if isinstance(t, torch.Tensor) and t.device != device else t,
                         data)


class LocalStepRunner:
    """Runs the step on the model's own device, in the calling thread."""

    def run(self, kind: str, step_fn: Callable[[Any], Any], data: Any, model: Any) -> Any:
        check_kind(kind)
        return step_fn(move_to_device(data, model_device(model)))
