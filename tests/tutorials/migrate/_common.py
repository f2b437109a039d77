"""What the migrate-guide programs share: ``tf`` (TensorFlow or multidev, from ``sys.argv[1]``), strategies, rounding.

The guides' TF2 halves are typed as printed with ``tf.`` -> ``md.``; these helpers only choose the
framework, split the CPU into 2 logical devices, set weights from a fixed pattern (both sides start
equal) and round what a snippet observed.
"""

import contextlib
import sys

import numpy as np

if sys.argv[1] == "tf":
    import tensorflow as tf
else:
    import multidev as tf

tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
_STRATEGIES = {}


def strategy(replicas):
    """The printed ``tf.distribute.MirroredStrategy()`` on ``replicas`` logical CPUs (TF's default
    takes the one CPU; its devices are named so both sides run the same replica count)."""
    if replicas not in _STRATEGIES:
        _STRATEGIES[replicas] = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])
    return _STRATEGIES[replicas]


def scope(replicas):
    """A strategy's scope on 2 replicas; on one, nothing (a plain TF2 program)."""
    return contextlib.nullcontext() if replicas == 1 else strategy(replicas).scope()


def deterministic(model, scale=0.3):
    """Every weight of a built model from a fixed pattern (the same on both sides)."""
    model.set_weights([(np.sin(np.arange(w.size) * 0.7 + i) * scale).reshape(w.shape).astype(w.dtype)
                       for i, w in enumerate(model.get_weights())])
    return model


def rnd(value, digits=5):
    """A tensor, array or number as nested lists of floats rounded to ``digits``."""
    if hasattr(value, "numpy"):
        value = value.numpy()
    return np.round(np.asarray(value, "float64"), digits).tolist()


def weights(model):
    """Sum and sum of squares of each weight."""
    return [[round(float(np.sum(w)), 5), round(float(np.sum(np.square(w.astype("float64")))), 5)]
            for w in (np.asarray(w) for w in model.get_weights())]


def history(h):
    return {k: [round(float(v), 5) for v in vs] for k, vs in sorted(h.history.items())}


def floats(logs):
    return {k: round(float(v), 5) for k, v in sorted((logs or {}).items())}


def synthetic_mnist(n_train=64, n_test=32, seed=3):
    """``(x_train, y_train), (x_test, y_test)``: 28x28 images in [0, 1) (the guides' ``x / 255.0``),
    int labels a linear map of them decides (MNIST's shapes; never downloaded)."""
    rng = np.random.RandomState(seed)
    x = rng.rand(n_train + n_test, 28, 28).astype("float32")
    y = np.argmax((x.reshape(len(x), -1) - 0.5) @ rng.randn(784, 10).astype("float32"), axis=1).astype("int64")
    return (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:])


def listing(directory):
    """Sorted file names under ``directory`` (relative), for what a callback left behind."""
    import os
    return sorted(os.path.relpath(os.path.join(d, f), directory) for d, _, fs in os.walk(directory) for f in fs)
