"""Keras 3's ``train_on_batch``/``test_on_batch``/``predict_on_batch`` on one device and on multidev's
MirroredStrategy (2 logical CPUs).

``python tests/integrations/_keras3_on_batch_program.py`` prints one JSON dict ``{"1": {case: observation},
"2": {...}}``: each case as plain Keras 3 (no strategy: the reference) and with the model built in
``MirroredStrategy(["/cpu:0", "/cpu:1"]).scope()``. An observation is what the program sees (returned
values, weights, metric states), or the exception's type and message. Float32 (Keras's default); the
weights start equal (set from numpy) and the data is fixed. Batches of 3 and 5 split unevenly ([2, 1],
[3, 2]); a batch of 1 leaves one replica without examples.
"""

import contextlib
import json
import os

os.environ["KERAS_BACKEND"] = "torch"
import keras  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import multidev as md  # noqa: E402

md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)
K, L = keras, keras.layers
rng = np.random.RandomState(0)
X = rng.randn(12, 4).astype("float32")
Y = (X @ np.array([[1.0], [-2.0], [0.5], [0.3]]) + 0.1).astype("float32")
YC = np.array([0, 1, 2, 1, 0, 2, 2, 1, 0, 1, 2, 0], "int64")
SW = np.linspace(0.5, 2.0, 12).astype("float32")
W1 = np.arange(12).reshape(4, 3) / 10.0 - 0.5
B1 = np.array([0.1, -0.1, 0.05])
W2 = np.arange(3).reshape(3, 1) / 5.0 - 0.2
W2C = np.arange(9).reshape(3, 3) / 7.0 - 0.5
STRATEGY = {}


def scope(replicas):
    if replicas == 1:
        return contextlib.nullcontext()
    if "s" not in STRATEGY:
        STRATEGY["s"] = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    return STRATEGY["s"].scope()


def num(value):
    return np.asarray(keras.ops.convert_to_numpy(value), "float64").tolist()


def regression(replicas, model_class=None):
    with scope(replicas):
        inputs = K.Input((4,))
        outputs = L.Dense(1)(L.Dense(3, activation="tanh")(inputs))
        model = (model_class or K.Model)(inputs, outputs)
        model.set_weights([W1, B1, W2, np.zeros(1)])
        model.compile(optimizer=K.optimizers.Adam(0.05), loss="mse", metrics=["mae"])
    return model


def observe(model, **extra):
    return {"w": [num(w) for w in model.get_weights()],
            "metric_states": [[num(v) for v in m.variables] for m in model.metrics], **extra}


def train_test_predict(r):
    """A few train_on_batch calls (even, uneven [2, 1] and [3, 2] splits), then test and predict."""
    model = regression(r)
    out = {"train": [num(model.train_on_batch(X[:4], Y[:4])), num(model.train_on_batch(X[4:7], Y[4:7])),
                     num(model.train_on_batch(X[7:], Y[7:]))],
           "test": num(model.test_on_batch(X[2:7], Y[2:7])),
           "predict": num(model.predict_on_batch(X[:5])),
           "predict_torch": num(model.predict_on_batch(torch.as_tensor(X[:3])))}
    return observe(model, **out)


def sample_weight_and_return_dict(r):
    model = regression(r)
    out = {"train_dict": model.train_on_batch(X[:5], Y[:5], sample_weight=SW[:5], return_dict=True),
           "train_list": num(model.train_on_batch(X[5:], Y[5:], sample_weight=SW[5:], return_dict=False)),
           "test_dict": model.test_on_batch(X[:7], Y[:7], sample_weight=SW[:7], return_dict=True),
           "test_list": num(model.test_on_batch(X[:4], Y[:4]))}
    return observe(model, **out)


def class_weight(r):
    with scope(r):
        model = K.Sequential([K.Input((4,)), L.Dense(3, activation="tanh"), L.Dense(3, activation="softmax")])
        model.set_weights([W1, B1, W2C, np.zeros(3)])
        model.compile(optimizer=K.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy",
                      metrics=["accuracy"], weighted_metrics=["accuracy"])
    out = {"train": [model.train_on_batch(X[:5], YC[:5], class_weight={0: 0.5, 1: 2.0, 2: 1.0}, return_dict=True),
                     model.train_on_batch(X[5:], YC[5:], class_weight={0: 1.5, 1: 0.2, 2: 1.0}, return_dict=True)],
           "test": model.test_on_batch(X, YC, return_dict=True)}
    return observe(model, **out)


def one_example(r):
    """A global batch of 1: the second replica's slice is empty (it still joins the gradient sum)."""
    model = regression(r)
    out = {"train": num(model.train_on_batch(X[:1], Y[:1])), "test": num(model.test_on_batch(X[1:2], Y[1:2])),
           "predict": num(model.predict_on_batch(X[2:3]))}
    return observe(model, **out)


class TorchStep(K.Model):
    """keras.io's custom_train_step_in_torch ``train_step`` (tests/programs/keras/p08), unpacking its data with
    ``keras.utils.unpack_x_y_sample_weight``: ``train_on_batch`` passes ``(x, y, sample_weight)``."""

    def train_step(self, data):
        x, y, _ = keras.utils.unpack_x_y_sample_weight(data)
        self.zero_grad()
        y_pred = self(x, training=True)
        loss = self.compute_loss(y=y, y_pred=y_pred)
        loss.backward()
        trainable_weights = [v for v in self.trainable_weights]
        gradients = [v.value.grad for v in trainable_weights]
        with torch.no_grad():
            self.optimizer.apply(gradients, trainable_weights)
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}


def custom_train_step(r):
    model = regression(r, TorchStep)
    out = {"train": [model.train_on_batch(X[:4], Y[:4], return_dict=True), num(model.train_on_batch(X[4:9], Y[4:9]))],
           "test": model.test_on_batch(X[9:], Y[9:], return_dict=True), "predict": num(model.predict_on_batch(X[:3]))}
    return observe(model, **out)


def custom_train_step_one_example(r):
    model = regression(r, TorchStep)
    return {"train": num(model.train_on_batch(X[:1], Y[:1]))}


class TwoValueStep(TorchStep):
    def train_step(self, data):
        x, y = data   # the guide's own line: train_on_batch's (x, y, None) does not unpack into two
        return super().train_step((x, y))


def custom_train_step_unpacking_two(r):
    model = regression(r, TwoValueStep)
    return {"train": num(model.train_on_batch(X[:4], Y[:4]))}


CASES = [train_test_predict, sample_weight_and_return_dict, class_weight, one_example, custom_train_step,
         custom_train_step_one_example, custom_train_step_unpacking_two]


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bool, int, str)) or value is None:
        return value
    return num(value)


def main():
    results = {}
    for replicas in (1, 2):
        results[str(replicas)] = out = {}
        for case in CASES:
            try:
                out[case.__name__] = _jsonable(case(replicas))
            except Exception as e:  # noqa: BLE001 (the observation: which exception, which message)
                out[case.__name__] = {"raises": type(e).__name__, "message": str(e)}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
