"""What the guide snippets share: ``tf`` (TensorFlow or multidev, from ``sys.argv[1]``), the strategy, rounding."""

import contextlib
import sys

import numpy as np

if sys.argv[1] == "tf":
    import tensorflow as tf
else:
    import multidev as tf

tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
K, L, ops = tf.keras, tf.keras.layers, tf.keras.ops
_STRATEGY = {}


def scope(replicas):
    """The MirroredStrategy's scope on 2 replicas (one strategy for the whole run), nothing on one."""
    if replicas == 1:
        return contextlib.nullcontext()
    if "s" not in _STRATEGY:
        _STRATEGY["s"] = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    return _STRATEGY["s"].scope()


def rnd(value, digits=5):
    """A tensor, array or number as nested lists of floats rounded to ``digits``."""
    if not isinstance(value, (np.ndarray, list, float, int)):
        value = ops.convert_to_numpy(value)   # a tensor (md's may require grad)
    rounded = np.round(np.asarray(value, "float64"), digits)
    return np.where(np.isnan(rounded), None, rounded).tolist()   # NaN (the guide's 0/0) as null: JSON has no NaN


def ints(value):
    return np.asarray(value).astype("int64").tolist()


def deterministic(layer, scale=0.3):
    """Set every weight of a built layer or model from a fixed pattern (same on both sides)."""
    layer.set_weights([(np.sin(np.arange(w.size) * 0.7 + i) * scale).reshape(w.shape).astype(w.dtype)
                       for i, w in enumerate(layer.get_weights())])
    return layer


def fingerprint(weights):
    """Sum and sum of squares of a list of weights."""
    ws = [np.asarray(w, "float64") for w in weights]
    return [round(float(sum(w.sum() for w in ws)), 5), round(float(sum((w * w).sum() for w in ws)), 5)]


def history(h):
    return {k: [round(float(v), 5) for v in vs] for k, vs in sorted(h.history.items())}


RNG = np.random.RandomState(0)
X = RNG.randn(10, 4).astype("float32")
Y = (X @ np.array([[1.0], [-2.0], [0.5], [0.3]], "float32") + np.float32(0.1)).astype("float32")
