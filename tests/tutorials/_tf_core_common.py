"""What the TF core tutorial programs share: ``tf`` (TensorFlow or multidev, from ``sys.argv[1]``),
the named substitutions for the pure math ops multidev leaves to torch, synthetic data, rounding.

Each substitution is one a ported program makes: multidev refuses the TF name with an AttributeError
naming the torch function (``tests/tutorials/test_tf_core_tutorials.py`` asserts that text), and the
program calls the torch function instead. On TensorFlow's side the TF op runs as printed.
"""

import contextlib
import sys

import numpy as np

IS_TF = sys.argv[1] == "tf"
if IS_TF:
    import tensorflow as tf
else:
    import torch

    import multidev as tf

tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
_STRATEGY = {}

# --- substitutions: TF's pure math ops, refused by multidev with the torch name to call ---------------
if IS_TF:
    softmax, relu, sigmoid, softplus, sin = tf.nn.softmax, tf.nn.relu, tf.nn.sigmoid, tf.nn.softplus, tf.math.sin
    linspace, stop_gradient = tf.linspace, tf.stop_gradient
else:
    def softmax(logits, axis=-1):
        return torch.softmax(logits, dim=axis)

    relu, sigmoid, softplus, sin = torch.relu, torch.sigmoid, torch.nn.functional.softplus, torch.sin
    linspace, stop_gradient = torch.linspace, tf.stop_gradient

def normal(shape, seed=0):
    """``tf.random.normal(shape)``: a seeded numpy draw on both sides (md refuses it naming torch.randn;
    TF's and torch's generators differ, and both frameworks must start from the same numbers)."""
    return tf.constant(np.random.RandomState(seed).randn(*shape).astype("float32"))


def scope(replicas):   # as tests/keras/_guides_common.py's, which needs Keras 3 (tf.keras.ops)
    """The MirroredStrategy's scope on 2 replicas (one strategy for the whole run), nothing on one."""
    if replicas == 1:
        return contextlib.nullcontext()
    if "s" not in _STRATEGY:
        _STRATEGY["s"] = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    return _STRATEGY["s"].scope()


def rnd(value, digits=5):
    """A tensor, variable, array or number as nested lists of floats rounded to ``digits``."""
    if hasattr(value, "detach"):   # a printed md tensor (the guides print these; .numpy() calls are the guides')
        value = value.detach()
    if hasattr(value, "numpy"):
        value = value.numpy()
    return np.round(np.asarray(value, "float64"), digits).tolist()


def ints(value):
    if hasattr(value, "numpy"):
        value = value.numpy()
    return np.asarray(value).astype("int64").tolist()


def dtype_name(dtype):
    """``'float32'`` for tf.float32 and torch.float32 alike."""
    return getattr(dtype, "name", None) or str(dtype).replace("torch.", "")


def deterministic(layer, scale=0.1):
    """Set every weight of a built layer or model from a fixed pattern (same on both sides)."""
    layer.set_weights([(np.sin(np.arange(w.size) * 0.7 + i) * scale).reshape(w.shape).astype(w.dtype)
                       for i, w in enumerate(layer.get_weights())])
    return layer


def copies_agree(variables):
    """Whether every replica's copy of every variable holds the same numbers (True off a strategy)."""
    def arrays(v):
        copies = getattr(v, "values", None)
        copies = copies if isinstance(copies, (list, tuple)) else [v]   # a tensor's .values is a method
        return [np.asarray(c.detach() if hasattr(c, "detach") else c) for c in copies]
    return all(np.array_equal(a, arrays(v)[0]) for v in variables for a in arrays(v))


def history(h):
    return {k: [round(float(v), 5) for v in vs] for k, vs in sorted(h.history.items())}


def raised(fn):
    """The exception ``fn()`` raises as {type, message}, or {"returned": ...} where it raises nothing."""
    try:
        out = fn()
    except Exception as e:  # the observation is the exception
        return {"raises": type(e).__name__, "message": str(e)[:300]}
    return {"returned": repr(out)[:100]}


def images(n, seed):
    """(n, 28, 28) uint8 images and int labels 0..9 (MNIST's and Fashion MNIST's shapes and dtypes)."""
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 10, size=n).astype("uint8")
    base = rng.randint(0, 80, size=(n, 28, 28))
    x = base + (labels[:, None, None].astype("int64") * 17 * (np.arange(28)[None, :, None] % 3 == 0))
    return x.clip(0, 255).astype("uint8"), labels
