"""Layer and model state written inside ``call`` on 2 replicas (and on 1), as programs write it.

Each case is ``case_<name>(tf, keras, flavour)`` and returns what a program would see (JSON-able);
``tf`` is TensorFlow 2.21 with ``keras`` its tf.keras (``flavour`` "keras3": Keras 3, "tf_keras2":
tf-keras 2 under ``TF_USE_LEGACY_KERAS=1``) when ``record_layer_state.py`` records them, and
``md``/``md.keras`` (flavour "md") when ``test_layer_state_on_replicas.py`` replays them. Both sides
configure 2 logical CPUs first. Nothing here imports TensorFlow, multidev or torch.

The guide's ``ComputeSum`` (Keras's "Making new layers and models via subclassing") and its
neighbours: a batch counter in ``fit``, each weight policy (``aggregation=``, Keras 3's strings,
``synchronization=ON_READ``) under assign/assign_add/assign_sub in cross-replica and replica
context, a BatchNorm-like moving mean, a variable of the program's own, metric attributes.
"""

from __future__ import annotations

import numpy as np

X = (np.arange(16, dtype="float32").reshape(8, 2) / 4.0).tolist()
Y = (np.arange(8, dtype="float32").reshape(8, 1) / 8.0).tolist()
_STRATEGIES: dict = {}


def strategy(tf, replicas: int):
    """One 2-replica and one 1-replica MirroredStrategy per process (TF's collectives keys are per process)."""
    key = (tf.__name__, replicas)
    if key not in _STRATEGIES:
        _STRATEGIES[key] = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])
    return _STRATEGIES[key]


def r6(x):
    """Nested lists of floats rounded to 6 decimals."""
    return np.round(np.asarray(x, dtype="float64"), 6).tolist()


def numpy(copy):
    """A replica's copy as numbers: TensorFlow's copies are variables; multidev's are torch tensors
    (a trainable one requires grad, so torch's ``numpy()`` refuses it undetached)."""
    return copy.detach().cpu().numpy() if hasattr(copy, "detach") else copy.numpy()


def local(tf, flavour, s, weight):
    """Every replica's copy of a layer weight (Keras 3 keeps the tf.Variable as ``_value``)."""
    inner = weight._value if flavour == "keras3" else weight
    return [r6(numpy(v)) for v in s.experimental_local_results(inner)]


def policy(tf, flavour, aggregation, on_read, spelling):
    """``add_weight`` keywords: TensorFlow's enums ("enum") or Keras 3's strings ("string")."""
    kw = {}
    if aggregation is not None:
        kw["aggregation"] = aggregation.lower() if spelling == "string" else getattr(tf.VariableAggregation, aggregation)
    if on_read:
        kw["synchronization"] = "on_read" if spelling == "string" else tf.VariableSynchronization.ON_READ
    return kw


def _compute_sum(keras, tf, op, kw):
    class ComputeSum(keras.layers.Layer):
        """The guide's layer (its weight unnamed, made in ``__init__``), with the write ``op``."""

        def __init__(self, input_dim):
            super().__init__()
            self.total = self.add_weight(initializer="zeros", shape=(input_dim,), trainable=False, **kw)

        def call(self, inputs):
            getattr(self.total, op)(tf.reduce_sum(inputs, axis=0))
            return inputs

    return ComputeSum(2)


def _stage(f):
    """``f()``, or the name of the exception it raises (later stages still run)."""
    try:
        return f()
    except Exception as exc:  # the observation is the type's name
        return {"raises": type(exc).__name__}


def _direct_and_run(aggregation, on_read, spelling, op):
    """Call in the scope (cross-replica), then ``strategy.run`` twice on a global batch of 4: what
    ``.numpy()`` reads and every replica's copy after each."""
    def case(tf, keras, flavour):
        s = strategy(tf, 2)
        with s.scope():
            layer = _compute_sum(keras, tf, op, policy(tf, flavour, aggregation, on_read, spelling))
        x = tf.constant(X[:4])
        batch = next(iter(s.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(x).batch(4))))
        out = [_stage(lambda: (layer(x), r6(layer.total.numpy()))[1])]
        out.append(_stage(lambda: local(tf, flavour, s, layer.total)))
        for _ in range(2):
            out.append(_stage(lambda: (s.run(layer, args=(batch,)), r6(layer.total.numpy()))[1]))
            out.append(_stage(lambda: local(tf, flavour, s, layer.total)))
        return out
    return case


def case_counter_built_in_run(tf, keras, flavour):
    """A Counter made in the scope and built by its first call, inside ``strategy.run`` (no Input)."""
    s = strategy(tf, 2)
    with s.scope():
        counter = _counter(keras, tf, {})
    x = tf.constant(X[:4])
    batch = next(iter(s.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(x).batch(4))))
    out = []
    for _ in range(2):
        s.run(counter, args=(batch,))
        out += [r6(counter.total.numpy()), local(tf, flavour, s, counter.total), local(tf, flavour, s, counter.count)]
    return out


def _in_model(keras, s, make_layer, learning_rate):
    """``(layer, model)``: the layer between an Input((2,)) and a Dense(1) of ones, compiled with SGD
    and mse, all in ``s``'s scope."""
    with s.scope():
        layer = make_layer()
        model = keras.Sequential([keras.Input((2,)), layer, keras.layers.Dense(1, kernel_initializer="ones")])
        model.compile(keras.optimizers.SGD(learning_rate), "mse")
    return layer, model


def _counter(keras, tf, kw):
    class Counter(keras.layers.Layer):
        """A running sum and a count of the samples seen (named weights made in ``build``)."""

        def build(self, input_shape):
            self.total = self.add_weight(name="total", shape=(input_shape[-1],), initializer="zeros",
                                         trainable=False, **kw)
            self.count = self.add_weight(name="count", shape=(), initializer="zeros", trainable=False, **kw)

        def call(self, inputs):
            self.total.assign_add(tf.reduce_sum(inputs, axis=0))
            self.count.assign_add(tf.cast(tf.shape(inputs)[0], tf.float32))
            return inputs

    return Counter()


def _fit_counter(aggregation, on_read, spelling, replicas=2):
    """A Counter inside a Sequential model trained by ``fit`` (8 samples, batches of 4, 1 epoch)."""
    def case(tf, keras, flavour):
        s = strategy(tf, replicas)
        counter, model = _in_model(keras, s, lambda: _counter(keras, tf, policy(tf, flavour, aggregation, on_read,
                                                                                spelling)), 0.0)
        built = [r6(counter.total.numpy()), r6(counter.count.numpy())]
        model.fit(np.array(X), np.array(Y), batch_size=4, epochs=1, verbose=0, shuffle=False)
        return [built, r6(counter.total.numpy()), r6(counter.count.numpy()), local(tf, flavour, s, counter.total),
                local(tf, flavour, s, counter.count)]
    return case


_POLICIES = {   # case name -> (aggregation, on_read, spelling)
    "default": (None, False, "enum"),
    "sum": ("SUM", False, "enum"), "mean": ("MEAN", False, "enum"),
    "only_first_replica": ("ONLY_FIRST_REPLICA", False, "enum"),
    "sum_string": ("SUM", False, "string"), "mean_string": ("MEAN", False, "string"),
    "only_first_replica_string": ("ONLY_FIRST_REPLICA", False, "string"),
    "on_read_sum": ("SUM", True, "enum"), "on_read_mean": ("MEAN", True, "enum"),
    "on_read_only_first_replica": ("ONLY_FIRST_REPLICA", True, "enum"), "on_read_none": (None, True, "enum"),
}
for _name, (_agg, _on_read, _spelling) in _POLICIES.items():
    for _op in ("assign_add", "assign", "assign_sub"):
        globals()[f"case_compute_sum_{_name}_{_op}"] = _direct_and_run(_agg, _on_read, _spelling, _op)
    globals()[f"case_fit_counter_{_name}"] = _fit_counter(_agg, _on_read, _spelling)
case_fit_counter_default_one_replica = _fit_counter(None, False, "enum", replicas=1)


def _moving_mean_layer(keras, tf, kw):
    class MovingMean(keras.layers.Layer):
        """A BatchNorm-like layer: centres by the batch mean in training and keeps a moving mean."""

        def build(self, input_shape):
            self.gamma = self.add_weight(name="gamma", shape=(input_shape[-1],), initializer="ones")
            self.moving_mean = self.add_weight(name="moving_mean", shape=(input_shape[-1],), initializer="zeros",
                                               trainable=False, **kw)

        def call(self, x, training=None):
            if training:
                batch_mean = tf.reduce_mean(x, axis=0)
                self.moving_mean.assign(0.9 * self.moving_mean + (1 - 0.9) * batch_mean)
                return (x - batch_mean) * self.gamma
            return (x - self.moving_mean) * self.gamma

    return MovingMean()


def _fit_moving_mean(aggregation, on_read, spelling, replicas):
    """``fit`` 2 epochs of SGD(0.1): losses, the moving mean read and per replica, the trained weights."""
    def case(tf, keras, flavour):
        s = strategy(tf, replicas)
        layer, model = _in_model(keras, s, lambda: _moving_mean_layer(keras, tf, policy(tf, flavour, aggregation,
                                                                                        on_read, spelling)), 0.1)
        history = model.fit(np.array(X), np.array(Y), batch_size=4, epochs=2, verbose=0, shuffle=False)
        predicted = model.predict(np.array(X[:4]), batch_size=4, verbose=0)
        return [r6(history.history["loss"]), r6(layer.moving_mean.numpy()), local(tf, flavour, s, layer.moving_mean),
                r6(layer.gamma.numpy()), r6(np.ravel(model.layers[-1].kernel.numpy())), r6(np.ravel(predicted))]
    return case


for _replicas in (1, 2):
    _suffix = f"_{_replicas}_replica" + ("s" if _replicas > 1 else "")
    globals()[f"case_moving_mean_default{_suffix}"] = _fit_moving_mean(None, False, "enum", _replicas)
    globals()[f"case_moving_mean_mean{_suffix}"] = _fit_moving_mean("MEAN", False, "enum", _replicas)
    globals()[f"case_moving_mean_mean_string{_suffix}"] = _fit_moving_mean("MEAN", False, "string", _replicas)
    globals()[f"case_moving_mean_on_read_mean{_suffix}"] = _fit_moving_mean("MEAN", True, "enum", _replicas)


def _program_variable(aggregation):
    """A variable of the program's own (``tf.Variable`` in the scope), written in ``strategy.run``."""
    def case(tf, keras, flavour):
        s = strategy(tf, 2)
        with s.scope():
            v = tf.Variable(1.0) if aggregation is None else \
                tf.Variable(1.0, aggregation=getattr(tf.VariableAggregation, aggregation))

        def step():
            ctx = tf.distribute.get_replica_context()
            v.assign_add(tf.cast(ctx.replica_id_in_sync_group, tf.float32) + 1.0)

        s.run(step)
        return [r6(numpy(c)) for c in s.experimental_local_results(v)]
    return case


for _agg in (None, "SUM", "MEAN", "ONLY_FIRST_REPLICA"):
    globals()[f"case_program_variable_{(_agg or 'none').lower()}"] = _program_variable(_agg)


def _metric_attributes(replicas):
    """Keras 3 style metrics kept as layer attributes and updated in ``call``: what ``fit`` and
    ``evaluate`` report, and the metrics after direct and ``strategy.run`` calls."""
    def case(tf, keras, flavour):
        class Tracked(keras.layers.Layer):
            def __init__(self):
                super().__init__()
                self.seen = keras.metrics.Mean(name="seen_mean")
                self.count = keras.metrics.Sum(name="seen_count")

            def call(self, x):
                self.seen.update_state(x)
                self.count.update_state(tf.cast(tf.shape(x)[0], tf.float32))
                return x

        s = strategy(tf, replicas)
        tracked, model = _in_model(keras, s, Tracked, 0.1)
        results = lambda layer: [r6(float(layer.seen.result())), r6(float(layer.count.result()))]  # noqa: E731
        out = [[m.name for m in model.metrics], results(tracked)]
        history = model.fit(np.array(X), np.array(Y), batch_size=4, epochs=2, verbose=0, shuffle=False)
        out += [{k: r6(v) for k, v in sorted(history.history.items())}, results(tracked)]
        logs = model.evaluate(np.array(X), np.array(Y), batch_size=4, verbose=0, return_dict=True)
        out += [{k: r6(v) for k, v in sorted(logs.items())}, results(tracked)]
        with s.scope():
            other = Tracked()
        x = tf.constant(X[:4])
        other(x)
        out.append(results(other))
        batch = next(iter(s.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(x).batch(4))))
        s.run(other, args=(batch,))
        out.append(results(other))
        return out
    return case


case_metric_attributes_2_replicas = _metric_attributes(2)
case_metric_attributes_1_replica = _metric_attributes(1)


def all_cases() -> list:
    """``[(name, function)]`` in definition order."""
    return [(name[5:], f) for name, f in globals().items() if name.startswith("case_") and callable(f)]
