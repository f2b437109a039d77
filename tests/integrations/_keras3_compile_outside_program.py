"""Keras 3 models created in multidev's MirroredStrategy scope (2 logical CPUs) and COMPILED OUTSIDE it, the
optimizer and metric objects made outside too (keras.io's ``run_experiment(model)`` helpers compile there):
``fit``, ``evaluate``, ``train_on_batch``, and the same program on one device.

``python tests/integrations/_keras3_compile_outside_program.py`` prints one JSON dict ``{"1": ..., "2": ...}``
(each case's history, evaluation and weights, or the exception's type and message).
"""

import json
import os

os.environ["KERAS_BACKEND"] = "torch"
import keras  # noqa: E402
import numpy as np  # noqa: E402

import multidev as md  # noqa: E402

md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)
X = np.random.RandomState(0).rand(64, 3).astype("float32")
Y = 2 * X.sum(1, keepdims=True) + 0.5   # tensorflow 2.21's Keras 3 saw the same inside and outside: the JSON
SW = np.linspace(0.5, 2.0, 64).astype("float32")


def model_in(scope):
    with scope:
        return keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, kernel_initializer="ones")])


def compiled_outside(scope, **compile_options):
    model = model_in(scope)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse",
                  metrics=[keras.metrics.MeanAbsoluteError(name="mae")], **compile_options)
    return model


def nums(values):
    return [float(v) for v in np.ravel(values)]


def fit_evaluate(scope):
    model = compiled_outside(scope)
    history = model.fit(X, Y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    return {"h": {k: nums(v) for k, v in sorted(history.history.items())}, "kernel": nums(model.get_weights()[0]),
            "evaluate": nums(model.evaluate(X, Y, batch_size=16, verbose=0))}


def weighted_and_string_metrics(scope):
    model = compiled_outside(scope, weighted_metrics=["mse"])
    history = model.fit(X, Y, sample_weight=SW, batch_size=16, epochs=1, shuffle=False, verbose=0)
    return {"h": {k: nums(v) for k, v in sorted(history.history.items())}, "kernel": nums(model.get_weights()[0])}


def evaluate_only_then_batches(scope):
    model = compiled_outside(scope)
    first = model.evaluate(X, Y, batch_size=16, verbose=0)
    on_batch = model.train_on_batch(X[:16], Y[:16])
    return {"evaluate": nums(first), "train_on_batch": nums(on_batch), "kernel": nums(model.get_weights()[0])}


class OwnStep(keras.Model):
    """keras.io's torch guide step, its tracker and loss made by an own ``compile`` (as semi-supervised SimCLR's)."""

    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(1, kernel_initializer="ones")

    def call(self, x):
        return self.dense(x)

    def compile(self, **kwargs):
        super().compile(**kwargs)
        self.loss_fn = keras.losses.MeanSquaredError()
        self.loss_tracker = keras.metrics.Mean(name="loss")

    @property
    def metrics(self):
        return [self.loss_tracker]

    def train_step(self, data):
        import torch

        x, y = data
        loss = self.loss_fn(y, self(x, training=True))
        self.zero_grad()
        loss.backward()
        gradients = [v.value.grad for v in self.trainable_weights]
        with torch.no_grad():
            self.optimizer.apply(gradients, self.trainable_weights)
        self.loss_tracker.update_state(loss)
        return {"loss": self.loss_tracker.result()}


def own_step_compiled_outside(scope):
    with scope:
        model = OwnStep()
    model.compile(optimizer=keras.optimizers.SGD(0.1))
    history = model.fit(X, Y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    return {"h": {k: nums(v) for k, v in sorted(history.history.items())}, "kernel": nums(model.get_weights()[0])}


CASES = [fit_evaluate, weighted_and_string_metrics, evaluate_only_then_batches, own_step_compiled_outside]


def main():
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    results = {}
    for replicas in ("1", "2"):
        results[replicas] = out = {}
        for case in CASES:
            keras.utils.set_random_seed(0)
            scope = strategy.scope() if replicas == "2" else md.distribute.get_strategy().scope()
            try:
                out[case.__name__] = case(scope)
            except Exception as e:  # the observation is the exception's type and message
                out[case.__name__] = {"raises": type(e).__name__, "message": str(e)[:300]}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
