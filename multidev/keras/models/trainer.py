"""Trainer: Keras's training API (compile, fit, evaluate, predict, *_on_batch) for Model.

Steps (``train_step``/``test_step``/``predict_step``) are Keras's overridable methods; loops run
them through ``self._step_runner.run(kind, step_fn, batch, model)`` (see ``step_runner``) so a
strategy can run them per replica.

Example:
    model.compile(optimizer="nadam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = model.fit(x, y, batch_size=32, epochs=3, validation_split=0.1)
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import torch

from multidev import nn
from multidev.keras import mixed_precision, optimizers
from multidev.keras.callbacks.base import CallbackList
from multidev.keras.layers.base import attached_metrics
from multidev.keras.layers.keras_tensor import flatten, map_structure
from multidev.keras.models import data_adapter as da, fit_args
from multidev.keras.models.compile_utils import AddedLossTracker, compiled_containers
from multidev.keras.models.epoch_iterator import EpochIterator, apply_class_weight, check_class_weight
from multidev.keras.models.replica_logs import check_reduction
from multidev.keras.models.worker_batches import per_worker_input
from multidev.keras.models.worker_input import worker_input_check
from multidev.keras.models.log_values import _floats, _number, _to_numpy
from multidev.keras.models.resume import worker_rng_sync


class Trainer:
    """Mixin of Model holding the compile state and the training loops."""

    loss = None   # what compile() was given last (Keras 3's `model.loss`)

    def _init_trainer(self):
        self.optimizer = self.compiled_loss = None
        self.compiled_metrics = None
        self.stop_training = False
        self._is_compiled = False
        self._compile_config = None
        self._resume_point = None        # set by BackupAndRestore.on_train_begin (see resume.py)
        self._train_iterator = None      # the running fit's EpochIterator (its input position)
        self._distribute_reduction_method = None

    @property
    def distribute_reduction_method(self) -> str:
        """How a strategy's step reduces the replicas' raw returned values in the logs ("auto": their mean,
        as TF 2.21's tf.keras; "sum": tf-keras 2's; "first": replica 0's). See replica_logs.py."""
        return self._distribute_reduction_method or "auto"

    @distribute_reduction_method.setter
    def distribute_reduction_method(self, value):
        self._distribute_reduction_method = None if value is None else check_reduction(value)

    # ----- compile --------------------------------------------------------------------------------
    def compile(self, optimizer="rmsprop", loss=None, metrics=None, loss_weights=None, weighted_metrics=None,
                run_eagerly=None, steps_per_execution=None, jit_compile=None, **kwargs):
        """Configure the optimizer, loss(es) and metrics (objects or Keras string names)."""
        if kwargs:
            raise TypeError(f"Invalid keyword argument(s) in `compile()`: {sorted(kwargs)!r}. Valid: optimizer, loss, "
                            "metrics, loss_weights, weighted_metrics, run_eagerly, steps_per_execution, jit_compile.")
        # Resolved before the model changes (a bad name leaves the previous compile intact); as Keras, under
        # a mixed_float16 policy the optimizer is wrapped in a LossScaleOptimizer.
        new_optimizer = mixed_precision.wrap_for_policy(optimizers.get(optimizer), self._dtype_policy)
        compiled = compiled_containers(loss, loss_weights, metrics, weighted_metrics, self._output_names())
        self.optimizer, (self.compiled_loss, self.compiled_metrics) = new_optimizer, compiled
        self._added_loss_tracker = AddedLossTracker() if loss is None else None   # add_loss only: Keras logs it
        self._compile_config = {"loss": loss, "metrics": metrics, "loss_weights": loss_weights,
                                "weighted_metrics": weighted_metrics}
        if loss is not None:   # Keras 3's attribute: keras.io's DDPM step calls self.loss(noise, pred_noise)
            self.loss = loss
        self._is_compiled = True
        self.stop_training = False

    def _output_names(self) -> list:
        return ["output_1"]

    def _assert_compiled(self, what):
        if not self._is_compiled:
            raise RuntimeError(f"You must compile your model before {what}. Call `model.compile(optimizer, loss)`.")

    @property
    def metrics(self) -> list:
        """The loss tracker(s), the compiled metrics, then the metrics layers keep as attributes (Keras 3's
        order: ``fit`` resets and reports them too). Before the first batch builds them, the
        compiled metrics are one ``compile_metrics`` entry (as Keras 3's), so a custom
        ``train_step`` updating ``for m in self.metrics: m.update_state(y, y_pred)`` builds them."""
        out = list(self.compiled_loss.metrics) if self.compiled_loss else self._added_loss_metrics()
        container = self.compiled_metrics
        if container is not None:
            out += container.metrics if container.listed_as_built() else container.pending()
        listed = set(map(id, out))
        return out + [m for m in attached_metrics(self) if id(m) not in listed]

    def _added_loss_metrics(self) -> list:
        """The added losses' tracker when the built-in steps (which update it) run; a custom step keeps its own."""
        added = self.__dict__.get("_added_loss_tracker")
        builtin = type(self).train_step is Trainer.train_step or type(self).test_step is Trainer.test_step
        return added.metrics if added is not None and builtin else []

    @property
    def metrics_names(self) -> list:
        return [m.name for m in self.metrics]

    def reset_metrics(self):
        """Reset the state of every metric."""
        for m in self.metrics:
            m.reset_state()

    # ----- steps (override these as in Keras) -----------------------------------------------------
    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The compiled loss plus ``model.losses`` for this batch.

        As Keras 3's, it does not update the ``loss`` tracker: ``train_step``/``test_step`` do
        (a custom step updates it itself). On a strategy the compiled loss divides by the global
        batch, and the added losses (``add_loss``, regularizers) by the number of replicas in sync,
        as TensorFlow does, so that summing the replicas' gradients counts each penalty once."""
        extra = self.losses
        regularization = nn.scale_regularization_loss(extra) if extra else None
        if self.compiled_loss is None:
            if regularization is not None:
                return regularization
            raise ValueError("No loss to compute. Provide a `loss` argument in `compile()`.")
        if y is None:
            raise ValueError("Target data is missing. Your model was compiled with a loss, and therefore expects "
                             "target data to be passed in `fit()` (x and y, or (x, y) batches).")
        return self.compiled_loss(y, y_pred, sample_weight, regularization, track=False)

    def _compute_loss(self, x, y, y_pred, sample_weight, training):
        """``compute_loss`` with ``training`` when an override takes it (Keras 3.3 added the argument)."""
        if "training" in inspect.signature(self.compute_loss).parameters:
            return self.compute_loss(x, y, y_pred, sample_weight, training=training)
        return self.compute_loss(x, y, y_pred, sample_weight)

    def _track_loss(self, loss, y_pred) -> None:
        """Record this step's loss in the ``loss`` tracker (Keras 3's train_step does it, not compute_loss)."""
        container = self.compiled_loss or self.__dict__.get("_added_loss_tracker")
        if container is not None:
            container.track(loss, _batch_of(y_pred))

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        """Update compiled metrics and return ``{name: result}`` for all metrics."""
        self.compiled_metrics.update_state(y, y_pred, sample_weight)
        return self.get_metrics_result()

    def get_metrics_result(self) -> dict:
        return {m.name: m.result() for m in self.metrics}

    def train_step(self, data):
        """Forward, loss, gradients, optimizer update, metrics; returns the logs."""
        x, y, sample_weight = da.unpack_x_y_sample_weight(data)
        y_pred = self(x, training=True)
        loss = self._compute_loss(x, y, y_pred, sample_weight, training=True)
        self._track_loss(loss, y_pred)
        variables = self.trainable_variables
        if variables:
            self.optimizer.minimize(loss, variables)
        else:   # as Keras 3: a frozen model still reports its loss and metrics
            warnings.warn("The model does not have any trainable weights.", stacklevel=2)
        return self.compute_metrics(x, y, y_pred, sample_weight)

    def test_step(self, data):
        """Forward in inference mode, loss and metrics; returns the logs."""
        x, y, sample_weight = da.unpack_x_y_sample_weight(data)
        y_pred = self(x, training=False)
        self._track_loss(self._compute_loss(x, y, y_pred, sample_weight, training=False), y_pred)
        return self.compute_metrics(x, y, y_pred, sample_weight)

    def predict_step(self, data):
        """Forward in inference mode; returns the predictions."""
        x, _, _ = da.unpack_x_y_sample_weight(data)
        return self(x, training=False)

    def _test_step_no_grad(self, data):
        with torch.no_grad():
            return self.test_step(data)

    def _predict_step_no_grad(self, data):
        with torch.no_grad():
            return self.predict_step(data)

    def make_train_function(self):
        """``fn(batch) -> logs`` running ``train_step`` through the step runner."""
        return lambda data: self._step_runner.run("train", self.train_step, data, self)

    def make_test_function(self):
        return lambda data: self._step_runner.run("test", self._test_step_no_grad, data, self)

    def make_predict_function(self):
        return lambda data: self._step_runner.run("predict", self._predict_step_no_grad, data, self)

    # ----- loops ----------------------------------------------------------------------------------
    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None, validation_split=0.0,
            validation_data=None, shuffle=True, class_weight=None, sample_weight=None, initial_epoch=0,
            steps_per_epoch=None, validation_steps=None, validation_batch_size=None, validation_freq=1, **kwargs):
        """Train for ``epochs`` epochs; returns the History callback."""
        fit_args.check_no_other("fit", kwargs)
        epochs, initial_epoch, steps_per_epoch, validation_steps, validation_split, validation_freq = fit_args.check_fit(
            epochs, initial_epoch, steps_per_epoch, validation_steps, validation_split, validation_freq)
        self._assert_compiled("training it")
        check_class_weight(class_weight)
        from multidev.keras.models import coordinated_fit  # variables on parameter servers: schedule steps
        if coordinated_fit.applies(self, x):
            return coordinated_fit.fit(self, x, epochs=epochs, steps_per_epoch=steps_per_epoch, callbacks=callbacks,
                                       verbose=verbose, validation_data=validation_data, initial_epoch=initial_epoch)
        # a DistributedSampler's loader, or an OFF/FILE-sharded dataset: each worker's own batches
        x = per_worker_input(self, coordinated_fit.local_input(x), own_streams=True, mapped=bool(class_weight))
        if validation_split and validation_data is None:
            (x, y, sample_weight), validation_data = da.split_for_validation(x, y, sample_weight, validation_split)
        train = EpochIterator(da.make_adapter(x, y, sample_weight, batch_size, shuffle), steps_per_epoch,
                              sync_rng=worker_rng_sync(self), worker_check=worker_input_check(self))
        val = self._validation_iterator(validation_data, validation_batch_size or batch_size, validation_steps)
        verbose = self._worker_verbosity(verbose)
        cbs = callbacks if isinstance(callbacks, CallbackList) else CallbackList(
            callbacks, add_history=True, add_progbar=verbose != 0, model=self, verbose=verbose, epochs=epochs,
            steps=train.steps)
        train_fn = self.make_train_function()
        self.stop_training = False
        self._train_iterator = train
        cbs.on_train_begin()
        initial_epoch, first_step = self._resume_fit(initial_epoch, train)
        epoch_logs = {}
        for epoch in range(initial_epoch, epochs):
            self.reset_metrics()
            cbs.on_epoch_begin(epoch)
            logs = None
            resumed_step = first_step if epoch == initial_epoch else 0
            for step, batch in train.enumerate_epoch(resumed_step):
                cbs.on_train_batch_begin(step)
                logs = train_fn(apply_class_weight(batch, class_weight))
                cbs.on_train_batch_end(step, logs)
                if self.stop_training:
                    break
            if logs is None and resumed_step:   # resumed after the epoch's last batch
                logs = self.get_metrics_result()
            if logs is None:
                raise ValueError("Unexpected result of `train_function` (Empty logs): the training data yielded no "
                                 "batch. Check that `x` is not empty and that the dataset is not exhausted.")
            epoch_logs = _floats(logs)
            if val is not None and _should_validate(epoch, validation_freq):
                val_logs = self._evaluate_loop(val, cbs)
                epoch_logs.update({f"val_{k}": v for k, v in val_logs.items()})
            cbs.on_epoch_end(epoch, epoch_logs)
            if self.stop_training or train.exhausted:
                break
        finalize = getattr(self.optimizer, "finalize_variable_values", None)
        if finalize is not None:      # use_ema: the weights take their moving averages, as in Keras 3
            finalize(self.trainable_weights)
        cbs.on_train_end(epoch_logs)
        self._train_iterator = None
        return cbs.history

    # ----- multi-worker and resuming (BackupAndRestore) -------------------------------------------
    def _resume_fit(self, initial_epoch, train):
        """``(first epoch, first step)``: ``initial_epoch`` and 0, or where a backup left off."""
        point, self._resume_point = self._resume_point, None
        if point is None:
            return initial_epoch, 0
        return point.apply(train, initial_epoch)

    def _worker_verbosity(self, verbose) -> int:
        """``verbose`` as an int; 0 on workers other than the chief (only the chief shows progress)."""
        verbose = 1 if verbose == "auto" else int(verbose)
        return verbose if self.distribute_strategy.extended.should_checkpoint else 0

    def _validation_iterator(self, validation_data, batch_size, steps):
        if validation_data is None:
            return None
        if isinstance(validation_data, (tuple, list)) and da.is_array_structure(validation_data[0]):
            if len(validation_data) not in (1, 2, 3):   # Keras 3 takes (x_val,): a model that adds its own loss
                raise ValueError("When passing validation_data, it must contain 1 (x_val,), 2 (x_val, y_val) or 3 "
                                 "(x_val, y_val, val_sample_weights) items, however it contains "
                                 f"{len(validation_data)} items.")
            adapter = da.ArrayAdapter(*validation_data, batch_size=batch_size)
        else:
            adapter = da.make_adapter(per_worker_input(self, validation_data))
        return EpochIterator(adapter, steps, worker_check=worker_input_check(self, "validation"), fresh_passes=True)

    def _evaluate_loop(self, iterator, cbs) -> dict:
        self.reset_metrics()
        test_fn = self.make_test_function()
        cbs.on_test_begin()
        logs = None
        for step, batch in iterator.enumerate_epoch():
            cbs.on_test_batch_begin(step)
            logs = test_fn(batch)
            cbs.on_test_batch_end(step, logs)
        if logs is None:
            raise ValueError("Unexpected result of `test_function` (Empty logs): the evaluation data yielded no batch.")
        logs = _floats(logs)
        cbs.on_test_end(logs)
        return logs

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None, steps=None,
                 callbacks=None, return_dict=False, **kwargs):
        """Loss and metrics on the data: a float (loss only), a list in ``metrics_names`` order, or a dict."""
        fit_args.check_no_other("evaluate", kwargs)
        self._assert_compiled("evaluating it")
        iterator = EpochIterator(da.make_adapter(per_worker_input(self, x, own_streams=True), y, sample_weight, batch_size, False), steps,
                                 worker_check=worker_input_check(self, "evaluation"))
        verbose = self._worker_verbosity(verbose)
        cbs = CallbackList(callbacks, add_progbar=verbose != 0, model=self, verbose=verbose, epochs=1,
                           steps=iterator.steps)
        logs = self._evaluate_loop(iterator, cbs)
        return self._batch_result(logs, return_dict)

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None, **kwargs):
        """Predictions for ``x`` as numpy arrays (concatenated over batches)."""
        iterator = EpochIterator(da.make_adapter(per_worker_input(self, x), None, None, batch_size, False), steps,
                                 worker_check=worker_input_check(self, "prediction"))
        verbose = self._worker_verbosity(verbose)
        cbs = CallbackList(callbacks, add_progbar=verbose != 0, model=self, verbose=verbose, epochs=1,
                           steps=iterator.steps)
        predict_fn = self.make_predict_function()
        cbs.on_predict_begin()
        outputs = []
        for step, batch in iterator.enumerate_epoch():
            cbs.on_predict_batch_begin(step)
            out = predict_fn(batch)
            outputs.append(out)    # read back at the end, as Keras 3: a read per batch would wait for the device
            cbs.on_predict_batch_end(step, {"outputs": out})
        cbs.on_predict_end()
        if not outputs:
            raise ValueError("Unexpected result of `predict_function` (Empty batch_outputs): the input yielded no batch.")
        return _concat([map_structure(_to_numpy, out) for out in outputs])

    # ----- single batches ---------------------------------------------------------------------------
    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None, reset_metrics=True, return_dict=False):
        """One gradient update on one batch; returns loss (and metrics) for the batch."""
        self._assert_compiled("training it")
        check_class_weight(class_weight)
        if reset_metrics:
            self.reset_metrics()
        batch = next(iter(da.make_adapter(x, y, sample_weight, batch_size=_batch_len(x), shuffle=False)))
        logs = _floats(self.make_train_function()(apply_class_weight(batch, class_weight)))
        return self._batch_result(logs, return_dict)

    def test_on_batch(self, x, y=None, sample_weight=None, reset_metrics=True, return_dict=False):
        """Loss (and metrics) of one batch without updating weights."""
        self._assert_compiled("evaluating it")
        if reset_metrics:
            self.reset_metrics()
        batch = next(iter(da.make_adapter(x, y, sample_weight, batch_size=_batch_len(x), shuffle=False)))
        return self._batch_result(_floats(self.make_test_function()(batch)), return_dict)

    def predict_on_batch(self, x):
        """Predictions for one batch as numpy."""
        batch = next(iter(da.make_adapter(x, None, None, batch_size=_batch_len(x), shuffle=False)))
        return map_structure(_to_numpy, self.make_predict_function()(batch))

    def _batch_result(self, logs, return_dict):
        if return_dict:
            return logs
        names = [n for n in self.metrics_names if n in logs]    # then what a custom step added
        values = [logs[n] for n in names] + [v for k, v in logs.items() if k not in names]
        return values[0] if len(values) == 1 else values


def _batch_of(y_pred) -> int:
    """The batch size of a step's predictions (its first tensor's leading dimension)."""
    leaves = [t for t in flatten(y_pred) if isinstance(t, torch.Tensor) and t.dim() > 0]
    return int(leaves[0].shape[0]) if leaves else 0


def _batch_len(x) -> int:
    leaves = [t for t in flatten(da._convert(x)) if isinstance(t, torch.Tensor)]
    return max(int(leaves[0].shape[0]), 1) if leaves else 1


def _concat(outputs, top=True):
    """Each leaf of the batches' (nested) outputs concatenated; nested pairs stay pairs (Keras 3's structure:
    keras.io's involution predicts a list of its layers' ``(output, kernel)`` tuples)."""
    first = outputs[0]
    if isinstance(first, (list, tuple)):
        parts = [_concat([o[i] for o in outputs], top=False) for i in range(len(first))]
        return parts if top or isinstance(first, list) else tuple(parts)
    if isinstance(first, dict):
        return {k: _concat([o[k] for o in outputs], top=False) for k in first}
    return np.concatenate(outputs)


def _should_validate(epoch, freq) -> bool:
    if isinstance(freq, int):
        return (epoch + 1) % freq == 0
    return (epoch + 1) in freq
