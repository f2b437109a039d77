"""Helpers shared by the conformance cases: turn what a case sees into JSON on either side.

A case is ``case_<name>(tf)``: ``tf`` is TensorFlow when the recorder runs it (tests/conformance/
record_tf.py, in TensorFlow's own venv) and multidev when CI runs it (``tf`` -> ``md`` is the whole
port). Nothing here imports TensorFlow, multidev or torch: values are read through the methods both
expose (``numpy()``, ``values``, ``dtype``).
"""

from __future__ import annotations

_DISTRIBUTED = {"PerReplica", "Mirrored", "MirroredVariable", "SyncOnReadVariable", "AggregatingVariable"}


def val(x):
    """A JSON-able picture of ``x``: numbers and nested lists for tensors, a type name and the
    components for distributed values."""
    name = type(x).__name__
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if name in _DISTRIBUTED:
        return {"type": name, "values": [val(v) for v in x.values]}
    if isinstance(x, dict):
        return {str(k): val(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [val(v) for v in x]
    if hasattr(x, "detach") and hasattr(x, "requires_grad"):   # a torch tensor (or md.Variable)
        x = x.detach().cpu()
    if hasattr(x, "numpy"):
        x = x.numpy()
    if hasattr(x, "tolist"):
        return x.tolist()
    return repr(x)


def dtype_name(x) -> str:
    """``float32`` for a TensorFlow or a torch dtype (or a value that has one); ``string`` for
    multidev's string components (dtype ``str``: torch has no string tensors)."""
    dtype = getattr(x, "dtype", x)
    if dtype is str:
        return "string"
    return getattr(dtype, "name", None) or str(dtype).replace("torch.", "")


def spec(s):
    """A JSON picture of an element spec: [shape, dtype] per TensorSpec, nested as the element."""
    if isinstance(s, dict):
        return {k: spec(v) for k, v in s.items()}
    if isinstance(s, (tuple, list)):
        return [spec(v) for v in s]
    try:
        shape = [None if d is None else int(d) for d in s.shape]
    except (TypeError, ValueError):   # unknown rank
        shape = None
    return [shape, dtype_name(s)]


def raises(fn, *args, **kwargs):
    """The name of the exception ``fn(*args, **kwargs)`` raises, or None."""
    try:
        fn(*args, **kwargs)
    except Exception as exc:  # the observation is the type's name
        return type(exc).__name__
    return None


def catches(fn, error_type) -> bool:
    """Whether ``except error_type`` catches what ``fn()`` raises (a TF program's handler; multidev's
    error may be TF's type and another)."""
    try:
        fn()
    except error_type:
        return True
    except Exception:  # noqa: BLE001 - not caught by the program's handler
        return False
    return False


def local(strategy, value):
    """``strategy.experimental_local_results(value)`` as plain numbers."""
    return [val(v) for v in strategy.experimental_local_results(value)]


_STRATEGIES: dict = {}


def two_cpus(tf):
    """The two-replica MirroredStrategy the cases share (both sides configure 2 logical CPUs).

    One per process, as a program has: TensorFlow's strategies in one process share collective
    instance keys, so a second strategy's collective of another shape fails with
    "Shape mismatch in the collective instance"."""
    if tf.__name__ not in _STRATEGIES:
        _STRATEGIES[tf.__name__] = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    return _STRATEGIES[tf.__name__]


def replica_id(tf):
    """The calling replica's id in its sync group, as a Python int."""
    return int(val(tf.distribute.get_replica_context().replica_id_in_sync_group))


def one_cpu(tf):
    """A one-replica MirroredStrategy (one per process, like ``two_cpus``): the one-device reference
    the custom-loop cases compare the two-replica run with."""
    key = tf.__name__ + "/one"
    if key not in _STRATEGIES:
        _STRATEGIES[key] = tf.distribute.MirroredStrategy(["/cpu:0"])
    return _STRATEGIES[key]


# Custom training loops (TensorFlow's "Custom training with tf.distribute.Strategy" tutorial, shrunk):
# ten examples of three features, two classes, a 3-4-2 MLP with fixed starting weights.
LOOP_X = [[((i * 7) % 5) / 5.0 - 0.4, ((i * 3) % 7) / 7.0 - 0.5, float(i % 3) - 1.0] for i in range(10)]
LOOP_Y = [0, 1, 1, 0, 1, 0, 0, 0, 1, 1]
LOOP_W = [1.0, 0.5, 2.0, 1.0, 0.0, 1.5, 1.0, 0.25, 1.0, 3.0]
_KERNELS = ([[0.2, -0.3, 0.5, 0.1], [-0.4, 0.6, 0.2, -0.1], [0.3, 0.1, -0.2, 0.7]],
            [[0.5, -0.6], [-0.3, 0.4], [0.2, 0.1], [-0.7, 0.3]])


def loop_model(tf, l2: float = 0.0):
    """The tutorial's model shape (Dense + Dense to logits), weights set after building so both sides
    start from the same numbers; ``l2`` adds a kernel regularizer (``model.losses``)."""
    reg = tf.keras.regularizers.L2(l2) if l2 else None
    model = tf.keras.Sequential([tf.keras.Input((3,)),
                                 tf.keras.layers.Dense(4, activation="relu", kernel_regularizer=reg),
                                 tf.keras.layers.Dense(2, kernel_regularizer=reg)])
    for layer, kernel in zip(model.layers, _KERNELS):
        layer.kernel.assign(tf.constant(kernel))
        layer.bias.assign(tf.constant([0.05 * (i + 1) for i in range(len(kernel[0]))]))
    return model


def loop_dataset(tf, batch: int = 4, weighted: bool = False, drop_remainder: bool = False):
    """(x, y) or (x, y, w) batches of the ten examples, in order."""
    tensors = (tf.constant(LOOP_X), tf.constant(LOOP_Y))
    if weighted:
        tensors += (tf.constant(LOOP_W),)
    return tf.data.Dataset.from_tensor_slices(tensors).batch(batch, drop_remainder=drop_remainder)


def weights(model):
    """Every trainable weight as nested lists, read through ``numpy()`` (one value, any strategy)."""
    return [val(v.numpy()) for v in model.trainable_variables]


def loop_replica_step(tf, model, optimizer, global_batch_size: int):
    """The tutorial's ``train_step(x, y)`` for ``strategy.run``: sparse cross-entropy on logits,
    ``compute_average_loss``, ``GradientTape`` and ``apply_gradients``; returns the replica's loss."""
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(loss_object(y, model(x, training=True)),
                                              global_batch_size=global_batch_size)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss
    return train_step


class InTempDirectory:
    """Run in a fresh temporary working directory (cases whose checkpoint paths are relative, as the
    guides write them)."""

    def __enter__(self):
        import os
        import tempfile
        self.cwd = os.getcwd()
        os.chdir(tempfile.mkdtemp())

    def __exit__(self, *exc):
        import os
        os.chdir(self.cwd)


# tf.data cases (data_guide.py, data_api.py): elements, typed values and specs, as the docs print them.

def typed(x):
    """An element with the dtype and shape of each component: ``[values, dtype, shape]`` leaves."""
    if isinstance(x, (tuple, list)):
        return [typed(v) for v in x]
    if isinstance(x, dict):
        return {k: typed(v) for k, v in x.items()}
    return [val(x), dtype_name(x), [int(d) for d in x.shape]]


def elements(ds, n=None):
    """The elements of ``ds`` (the first ``n``) as plain values."""
    out = []
    for i, e in enumerate(ds):
        if n is not None and i >= n:
            break
        out.append(val(e))
    return out


def texts(ds):
    """String elements, read through ``as_numpy_iterator`` (bytes on both sides)."""
    return [[b.decode() for b in x] if isinstance(x, (tuple, list)) else x.decode() for x in ds.as_numpy_iterator()]


def card(ds):
    """``ds.cardinality().numpy()`` as the API docs print it."""
    return int(ds.cardinality().numpy())


def dataset_spec(s):
    """A window's element_spec: DatasetSpec of the components' specs."""
    return [type(s).__name__, spec(s.element_spec)]



def keras2(tf):
    """The Keras a guide printed for tf.keras 2 runs with: ``tf_keras`` on TensorFlow (TF 2.21's
    ``tf.keras`` is Keras 3; the guides' ``get_scaled_loss`` is tf.keras 2's, as with
    ``TF_USE_LEGACY_KERAS=1``), ``md.keras`` on multidev."""
    if tf.__name__ == "tensorflow":
        import tf_keras
        return tf_keras
    return tf.keras


def approx(x, atol: float) -> dict:
    """``x``'s numbers, compared within ``atol`` (harness.same): float16 computation rounds differently in
    TensorFlow's CPU kernels and torch's, and rounding to fixed digits would flip near a boundary."""
    return {"approx": val(x), "atol": atol}


def scope_of(strategy):
    """``strategy.scope()``, or no scope for the one-device runs of a guide's cases."""
    import contextlib
    return strategy.scope() if strategy is not None else contextlib.nullcontext()


def fixed_weights(model, scale: float):
    """Set every weight of ``model`` to a fixed pattern times ``scale`` (both sides start equal)."""
    import numpy as np
    model.set_weights([np.array([((k * 7) % 13) / 13.0 - 0.45 for k in range(int(np.prod(w.shape)))],
                                "float32").reshape(w.shape) * scale for w in model.get_weights()])
    return model


def torch_or_tf(tf, tf_name, torch_name):
    """TensorFlow's op ``tf_name`` on TensorFlow, torch's ``torch_name`` on multidev (whose tensors are torch
    tensors; multidev refuses TF's pure math ops it leaves to torch, naming the torch function)."""
    import importlib
    out = tf if tf.__name__ == "tensorflow" else importlib.import_module("torch")
    for part in (tf_name if tf.__name__ == "tensorflow" else torch_name).split("."):
        out = getattr(out, part)
    return out


def rounded(x, digits: int = 5):
    """``val(x)`` with every number rounded to ``digits`` (None stays None; dicts and lists kept)."""
    x = val(x)
    if x is None:
        return None
    if isinstance(x, dict):
        return {k: rounded(v, digits) for k, v in x.items()}
    return [rounded(v, digits) for v in x] if isinstance(x, list) else round(float(x), digits)


# tensorflow.org's generative and customization tutorials (cvae_tutorial.py, dcgan_tutorial.py, ...): their
# ``tf.random.normal`` draws are fixed tables (md refuses md.random.normal, naming torch.randn; TF's and torch's
# random streams differ anyway).

def normal_table(tf, shape, offset: int = 0):
    """What the tutorials draw with ``tf.random.normal(shape)``: a fixed float32 table of that shape
    (values in about [-1.5, 1.5]), the same on both sides; ``offset`` picks another table."""
    import numpy as np
    n = int(np.prod([int(d) for d in shape]))
    values = 1.5 * np.sin(np.arange(offset, offset + n) * 1.7 + 0.3)
    return tf.constant(values.astype("float32").reshape([int(d) for d in shape]))


def binary_images(n: int, side: int = 28, seed: int = 0):
    """``n`` binarized side x side x 1 "images" (the CVAE tutorial's ``preprocess_images`` output), float32."""
    import numpy as np
    i = np.arange(n * side * side).reshape(n, side, side, 1)
    return (np.sin(i * 0.37 + seed) + np.cos(i * 0.11 * (seed + 1)) > 0.3).astype("float32")
