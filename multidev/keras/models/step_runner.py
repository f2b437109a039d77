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

import contextlib
from typing import Any, Callable, Protocol

import torch

from multidev._core.user_warnings import warn_user
from multidev.devices import registry
from multidev.keras.layers import weights_device
from multidev.keras.step_inputs import check_kind
from multidev.placement.scope import current_device, device_scope

_NO_SCOPE = contextlib.nullcontext()


class StepRunner(Protocol):
    """Runs one step of ``kind`` ('train', 'test', 'predict') on one batch; returns the logs (the
    predictions for 'predict')."""

    def run(self, kind: str, step_fn: Callable[[Any], Any], data: Any, model: Any) -> Any: ...


class LocalStepRunner:
    """Runs the step on the model's own device, in the calling thread: the batch moved there and, off the CPU, in
    that device's scope (tensors a custom ``train_step`` makes land there, as in a replica)."""

    def __init__(self) -> None:
        self._placement_checked = False

    def run(self, kind: str, step_fn: Callable[[Any], Any], data: Any, model: Any) -> Any:
        check_kind(kind)
        weight = weights_device.first_weight(model)
        if not self._placement_checked and kind == "train":
            self._placement_checked = True
            _warn_if_a_gpu_idles(weight)
        if weight is not None:
            data = weights_device.on_device(data, weight.device)
        build_before_step(model, data)
        in_scope = (weight is not None and weight.device.type != "cpu" and current_device() is None
                    and all(p.device == weight.device for p in model.parameters()))   # not a model placed by hand
        with train_grad_mode(kind), device_scope(registry.device_for_tensor(weight)) if in_scope else _NO_SCOPE:
            return step_fn(data)


def _warn_if_a_gpu_idles(weight) -> None:
    """TensorFlow places a model made outside any scope on GPU:0; multidev leaves it where torch made it (the CPU).
    Say so once per model, at its first training step, rather than train on the CPU unannounced."""
    if weight is None or weight.device.type != "cpu" or current_device() is not None:
        return
    gpus = registry.logical_devices("GPU")
    if gpus:
        warn_user(
            f"md.keras: fit runs on the CPU, where this model's weights are, although {len(gpus)} logical GPU(s) are "
            "visible (TensorFlow would place the model on GPU:0). To train on a GPU, make the model inside "
            "`with md.device('/GPU:0'):` or a strategy's scope (`md.distribute.MirroredStrategy()` takes every GPU).",
            UserWarning)


def train_grad_mode(kind: str) -> contextlib.AbstractContextManager:
    """Around a step on the calling thread: a train step records gradients whatever torch's grad mode there
    (TensorFlow has none; replicas take the caller's modes). A Ctrl-C landing inside a ``torch.no_grad()``'s
    ``__enter__`` (Python code) leaves it off for good: the next ``fit`` raised "element 0 of tensors does not
    require grad"."""
    return torch.enable_grad() if kind == "train" else contextlib.nullcontext()


def build_before_step(model, data, scope=None) -> None:
    """Build a lazily-built model on ``data`` in inference mode, before its first step, drawing nothing from the
    program's random streams: TensorFlow's Keras builds it before training (Keras 3 symbolically, tf.keras 2 while
    tracing), so its weights' initial draws come one after another, never between the first step's dropout masks
    (keras.io's NER model: a TransformerBlock's Dropout sits between two lazily built Dense layers), on one device
    as on replicas (``scope``: the strategy's, whose variables the weights become)."""
    if any(True for _ in model.parameters()) and (getattr(model, "built", True) or _layers_built(model)):
        return
    from multidev.keras import random
    from multidev.keras.models.data_adapter import unpack_x_y_sample_weight

    x, _, _ = unpack_x_y_sample_weight(data)
    try:
        with scope or contextlib.nullcontext(), torch.no_grad(), random.unconsumed():   # one device makes no such
            model(x, training=False)                                                    # pass: draw nothing
    except Exception as err:   # noqa: BLE001 - only a model with its own train_step gets past it
        if not _own_train_step(model):
            raise
        if scope is not None:   # replicas must find the weights made, as distributed variables
            raise ValueError(
                f"{type(model).__name__} is not built, and its call failed on fit's x ({type(err).__name__}: {err}). "
                "Build it in the strategy's scope before fit: call it once on the inputs its own train_step gives it "
                "(keras.io's GAT: model([node_states, edges])). md.keras builds a model before its first step on "
                "replicas by calling it on fit's x, so that its weights are distributed variables.") from err
        # one device: the step builds it when it calls the model, as tf.keras 2's traced train_step does


def _own_train_step(model) -> bool:
    from multidev.keras.models.trainer import Trainer

    return type(model).train_step is not Trainer.train_step


def _layers_built(model) -> bool:
    """Whether every layer inside ``model`` is built (a subclassed model wrapping built models, as keras.io's
    trainer and mean-teacher patterns: its own ``call`` may not take the ``fit`` inputs its ``train_step`` does,
    and one device never calls it before the step either)."""
    return all(getattr(m, "built", True) for m in model.modules() if m is not model)
