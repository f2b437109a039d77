"""Keras's ``fit``/``evaluate``/``predict`` on a Keras 3 model distributed by multidev (``keras3``'s seam).

Keras runs its own loop; the step function is multidev's: Keras's built-in step split across the
replicas (``keras3_fit``) or the model's own ``train_step``/``test_step`` on every replica
(``keras3_custom_step``). A model not built yet uses the strategy of the scope it was created in
(``keras3_layers``); the ``*_on_batch`` methods, which would run on one replica, are refused.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

from multidev.distribute.multi_worker_mirrored_strategy import MultiWorkerMirroredStrategy
from multidev.integrations import keras3, keras3_custom_step, keras3_fit, keras3_layers
from multidev.values.variables import DistributedVariable

_STEP_FUNCTIONS = {"fit": "train_function", "evaluate": "test_function", "predict": "predict_function"}


def _model_strategy(model: Any) -> Any | None:
    """The strategy that distributed ``model``'s variables (None: an ordinary Keras model)."""
    for v in model.variables:
        if isinstance(v._value, DistributedVariable):
            return v._value._strategy
    return None


def trainer(name: str, original: Any, model: Any, *args: Any, **kwargs: Any) -> Any:
    """Keras's ``fit``/``evaluate``/``predict`` on a distributed model: Keras's loop, multidev's step function
    (the global batch split across the strategy's replicas, all workers'); anything else that would run on
    one replica only is refused."""
    strategy = _model_strategy(model) or keras3_layers.creation_strategy(model)  # unbuilt: built in its scope
    if strategy is None:
        return original(model, *args, **kwargs)
    if name not in _STEP_FUNCTIONS:
        raise NotImplementedError(
            f"Keras 3's own model.{name}() on a model built in {type(strategy).__name__}'s scope is not supported: "
            "it would run on one replica only. Use fit/evaluate/predict, train with a custom loop "
            "(strategy.run; see README 'Keras 3 models'), or build the model with md.keras."
        )
    _check_steps_per_execution(model, name)
    keras = sys.modules["keras"]
    tracker = keras3_custom_step.ResultTracker()
    custom = {"fit": "train_step", "evaluate": "test_step"}.get(name)
    if name != "predict":
        keras3_custom_step.check_batches(keras, original, model, strategy, args, kwargs)
    if name == "predict":
        step = keras3_fit.predict_function(keras, model, strategy)
    elif keras3_custom_step.overrides(keras, model, custom):
        step = keras3_custom_step.step_function(model, strategy, custom, tracker)
    else:
        make = keras3_fit.train_function if name == "fit" else keras3_fit.test_function
        step = make(keras, model, strategy, keras3.loss_tracker(model))
    if name == "fit" and type(strategy) is MultiWorkerMirroredStrategy:  # every worker must shuffle alike
        callback = keras3_fit.same_shuffle_callback(keras, strategy)
        args, kwargs = _with_same_shuffle(original, model, args, kwargs, callback)
    if strategy.extended.worker_index != 0:   # only the chief prints progress bars, as md.keras (and TF) do
        args, kwargs = _silent(original, model, args, kwargs)
    attribute = _STEP_FUNCTIONS[name]
    with strategy.scope():  # variables fit creates (optimizer, metrics) are distributed too
        setattr(model, attribute, step)
        try:
            return original(model, *args, **kwargs)
        finally:
            setattr(model, attribute, None)
            tracker.restore()


def _check_steps_per_execution(model: Any, name: str) -> None:
    """Keras's torch backend refuses ``steps_per_execution > 1`` when it makes its step function; multidev's
    step functions replace Keras's and take one batch per call, so they must refuse it too (they would
    otherwise train on every other batch)."""
    steps = getattr(model, "steps_per_execution", 1)
    if steps > 1:
        raise ValueError(
            f"`steps_per_execution` must be 1 with the PyTorch backend. Received: steps_per_execution={steps!r} "
            f"(model.{name}() on a model distributed by multidev, as Keras 3 on one device raises). Compile with "
            "steps_per_execution=1 (the default)."
        )


def _silent(original: Any, model: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``fit``/``evaluate``/``predict``'s arguments, all by keyword, with ``verbose=0``."""
    arguments = inspect.signature(original).bind(model, *args, **kwargs).arguments
    arguments.pop(next(iter(arguments)))  # self
    arguments["verbose"] = 0
    return (), arguments


def _with_same_shuffle(original: Any, model: Any, args: tuple, kwargs: dict, callback: Any) -> tuple[tuple, dict]:
    """``fit``'s arguments, all by keyword, with ``callback`` run last when the call shuffles (Keras's default)."""
    arguments = inspect.signature(original).bind(model, *args, **kwargs).arguments
    arguments.pop(next(iter(arguments)))  # self
    if not arguments.get("shuffle", True):
        return args, kwargs
    callbacks = arguments.get("callbacks")
    if isinstance(callbacks, sys.modules["keras"].callbacks.CallbackList):
        callbacks.append(callback)
    else:
        arguments["callbacks"] = list(callbacks or []) + [callback]
    return (), arguments
