"""Keras's ``fit``/``evaluate``/``predict`` on a Keras 3 model distributed by multidev (``keras3``'s seam).

Keras runs its own loop; the step function is multidev's: Keras's built-in step split across the
replicas (``keras3_fit``) or the model's own ``train_step``/``test_step`` on every replica
(``keras3_custom_step``). A model not built yet uses the strategy of the scope it was created in
(``keras3_layers``). ``train_on_batch``/``test_on_batch``/``predict_on_batch`` run the same step functions
on their one batch, the global batch (Keras's own method resets the metrics and turns ``class_weight``
into sample weights before calling the step function, as on one device).
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

from multidev.distribute.multi_worker_mirrored_strategy import MultiWorkerMirroredStrategy
from multidev.integrations import keras3, keras3_custom_step, keras3_fit, keras3_layers
from multidev.values.variables import DistributedVariable

_STEP_FUNCTIONS = {"fit": "train_function", "evaluate": "test_function", "predict": "predict_function"}
_LOOP_OF = {"train_on_batch": "fit", "test_on_batch": "evaluate", "predict_on_batch": "predict"}


def _model_strategy(model: Any) -> Any | None:
    """The strategy that distributed ``model``'s variables (None: an ordinary Keras model)."""
    for v in model.variables:
        if isinstance(v._value, DistributedVariable):
            return v._value._strategy
    return None


def trainer(name: str, original: Any, model: Any, *args: Any, **kwargs: Any) -> Any:
    """Keras's ``fit``/``evaluate``/``predict`` (and their ``*_on_batch`` forms) on a distributed model: Keras's
    loop, multidev's step function (the global batch split across the strategy's replicas, all workers')."""
    strategy = _model_strategy(model) or keras3_layers.creation_strategy(model)  # unbuilt: built in its scope
    if strategy is None:
        return original(model, *args, **kwargs)
    _check_steps_per_execution(model, name)
    _note_jit_compile(model, strategy, name)
    _adopt_compiled_metrics(model, strategy)
    on_batch, name = name in _LOOP_OF, _LOOP_OF.get(name, name)
    keras = sys.modules["keras"]
    tracker = keras3_custom_step.ResultTracker()
    custom = {"fit": "train_step", "evaluate": "test_step"}.get(name)
    if name != "predict" and not on_batch:  # one batch: a custom step checks its slices itself
        keras3_custom_step.check_batches(keras, original, model, strategy, args, kwargs)
    if name == "predict":
        step = keras3_fit.predict_function(keras, model, strategy)
    elif keras3_custom_step.overrides(keras, model, custom):
        step = keras3_custom_step.step_function(model, strategy, custom, tracker)
    else:
        make = keras3_fit.train_function if name == "fit" else keras3_fit.test_function
        step = make(keras, model, strategy, keras3.loss_tracker(model))
    if name == "fit" and not on_batch and type(strategy) is MultiWorkerMirroredStrategy:  # workers shuffle alike
        callback = keras3_fit.same_shuffle_callback(keras, strategy)
        args, kwargs = _with_same_shuffle(original, model, args, kwargs, callback)
    if strategy.extended.worker_index != 0 and not on_batch:  # only the chief prints progress, as md.keras, TF do
        args, kwargs = _silent(original, model, args, kwargs)
    attribute = _STEP_FUNCTIONS[name]
    with strategy.scope():  # variables fit creates (optimizer, metrics) are distributed too
        setattr(model, attribute, step)
        try:
            return original(model, *args, **kwargs)
        finally:
            setattr(model, attribute, None)
            tracker.restore()


def _adopt_compiled_metrics(model: Any, strategy: Any) -> None:
    """Distribute the variables of the metrics ``compile`` made or was given OUTSIDE the strategy's scope (the loss
    tracker, the metric objects; keras.io's ``run_experiment(model)`` compiles there): one plain copy would be
    written by every replica (refused), where Keras 3 on TensorFlow's MirroredStrategy sums the replicas' updates
    into it, the one-device result; as ON_READ variables each replica keeps its part and reads sum them (as the
    optimizer's variables made outside are adopted, ``keras3_split.adopt_optimizer``)."""
    keras = sys.modules["keras"]
    compiled = getattr(model, "_compile_metrics", None)
    given = [getattr(compiled, name, None) for name in ("_user_metrics", "_user_weighted_metrics")]
    metrics = [getattr(model, "_loss_tracker", None), *keras.tree.flatten([m for m in given if m is not None]),
               *_own_metrics(model, keras)]
    for metric in metrics:
        if isinstance(metric, keras.metrics.Metric):
            for variable in metric.variables:
                if not isinstance(variable._value, DistributedVariable):
                    variable._value = keras3._distribute_for(strategy, variable)


def _own_metrics(model: Any, keras: Any) -> list:
    """The trackers a model's own ``metrics`` property lists (``self.loss_tracker = keras.metrics.Mean()`` made in an
    overridden ``compile`` or ``__init__``, keras.io's custom ``train_step`` idiom): made outside the scope, the
    replicas' ``update_state`` raced on its one plain copy, and the logged loss was wrong in some runs."""
    try:
        listed = model.metrics
    except Exception:   # a model whose property needs what it has not built yet: its trackers stay as they are
        return []
    return [m for m in keras.tree.flatten(list(listed)) if isinstance(m, keras.metrics.Metric)]


def _note_jit_compile(model: Any, strategy: Any, name: str) -> None:
    """``compile(jit_compile=True)``: Keras's torch backend runs its step function through ``torch.compile``
    (inductor), but multidev's step functions replace Keras's and run each replica's step eagerly: the same
    numbers (tests/integrations/test_keras3_jit_compile.py), not compiled. Said once per call site."""
    if getattr(model, "jit_compile", False) is True:
        from multidev._core.user_warnings import warn_user

        warn_user(f"model.{name}() on {type(strategy).__name__}: the model was compiled with jit_compile=True, which "
                  "Keras 3's torch backend turns into torch.compile of its step function; multidev runs each replica's "
                  "step eagerly instead (same results, not compiled). Compile with jit_compile=False (the torch backend's "
                  "default) to silence this.")


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
