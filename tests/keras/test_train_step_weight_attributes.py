"""Custom ``train_step``s that name weights as attributes (``tape.gradient(loss, [self.w, self.v])``),
as TensorFlow programs write them, on one device and on 2 replicas: same weights, same logs.

Inside ``strategy.run`` a module attribute is the replica's copy of its variable; the optimizer must
update the variable (every copy), not refuse the copy as "not mirrored". MirroredStrategy over 2 of
the suite's logical CPUs (tests/conftest.py).
"""

import json
from pathlib import Path

import numpy as np
import pytest

import multidev as md
from multidev.keras import layers

DEVICES = ["/cpu:0", "/cpu:1"]


def _data(n=32, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(n, 6).astype("float32")
    return x, (x[:, :1] * 2 - x[:, 1:2] + 1).astype("float32")


def _fit_both(make, epochs=2, callbacks=()):
    x, y = _data()
    out = []
    for strategy in (None, md.distribute.MirroredStrategy(DEVICES)):
        md.keras.utils.set_random_seed(1)
        scope = strategy.scope() if strategy is not None else _null()
        with scope:
            model = make()
            model.compile(optimizer=md.keras.optimizers.SGD(0.05), loss="mse")
        history = model.fit(x, y, batch_size=8, epochs=epochs, shuffle=False, verbose=0,
                            callbacks=list(callbacks)).history
        out.append((model, [w.copy() for w in model.get_weights()], history))
    return out


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _assert_same(runs, trained=True):
    (m1, w1, h1), (m2, w2, h2) = runs
    assert len(w1) == len(w2)
    for a, b in zip(w1, w2):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # (the logged loss is replica 0's compute_loss, scaled for 2 replicas as TensorFlow's: not compared)
    if trained:
        assert h1["loss"][-1] < h1["loss"][0]


class _Step(md.keras.Model):
    """A train_step over ``self._pick()``: tape.gradient on those, apply_gradients(zip(...))."""

    def train_step(self, data):
        x, y = data
        with md.GradientTape() as tape:
            loss = self.compute_loss(y=y, y_pred=self(x, training=True))
        variables = self._pick()
        grads = tape.gradient(loss, variables)
        self.optimizer.apply_gradients(zip(grads, variables))
        return {"loss": loss}


class InitWeights(_Step):
    def __init__(self):
        super().__init__()
        self.w = self.add_weight(shape=(6, 1), initializer="glorot_uniform", name="w")
        self.v = self.add_weight(shape=(1,), initializer="zeros", name="v")

    def call(self, x):
        return x @ self.w + self.v

    def _pick(self):
        return [self.w, self.v]


class BuiltLinear(layers.Layer):
    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], 1), initializer="glorot_uniform", name="w")
        self.b = self.add_weight(shape=(1,), initializer="zeros", name="b")

    def call(self, x):
        return x @ self.w + self.b


class BuildWeights(_Step):
    def __init__(self):
        super().__init__()
        self.lin = BuiltLinear()

    def call(self, x):
        return self.lin(x)

    def train_step(self, data):   # Keras 3's optimizer.apply(grads, variables)
        x, y = data
        with md.GradientTape() as tape:
            loss = self.compute_loss(y=y, y_pred=self(x, training=True))
        grads = tape.gradient(loss, [self.lin.w, self.lin.b])
        self.optimizer.apply(grads, [self.lin.w, self.lin.b])
        return {"loss": loss}


class VariableAttributes(_Step):
    def __init__(self):
        super().__init__()
        self.w = md.Variable(np.full((6, 1), 0.1, "float32"), name="w")
        self.v = md.Variable(0.0, name="v")

    def call(self, x):
        return x @ self.w + self.v

    def _pick(self):
        return [self.w, self.v]


class EncoderHead(_Step):
    def __init__(self):
        super().__init__()
        self.encoder = layers.Dense(4, activation="tanh")
        self.head = layers.Dense(1)

    def call(self, x):
        return self.head(self.encoder(x))

    def _pick(self):
        return self.encoder.trainable_variables + self.head.trainable_variables


class TwoOptimizers(EncoderHead):
    """A second optimizer made in a ``compile`` override updates the head; ``self.optimizer`` the encoder."""

    def compile(self, **kwargs):
        super().compile(**kwargs)
        self.head_optimizer = md.keras.optimizers.SGD(0.1)

    def train_step(self, data):
        x, y = data
        with md.GradientTape(persistent=True) as tape:
            loss = self.compute_loss(y=y, y_pred=self(x, training=True))
        enc = [self.encoder.kernel, self.encoder.bias]
        head = [self.head.kernel, self.head.bias]
        self.optimizer.apply_gradients(zip(tape.gradient(loss, enc), enc))
        self.head_optimizer.apply_gradients(zip(tape.gradient(loss, head), head))
        return {"loss": loss}


class WatchUnconnected(InitWeights):
    """``tape.watch(self.w)``, a weight only one branch uses (None gradient, skipped), and
    ``unconnected_gradients='zero'`` on it."""

    def __init__(self):
        super().__init__()
        self.unused = self.add_weight(shape=(1,), initializer="ones", name="unused")

    def train_step(self, data):
        x, y = data
        with md.GradientTape(watch_accessed_variables=False, persistent=True) as tape:
            tape.watch(self.w)
            tape.watch(self.v)
            loss = self.compute_loss(y=y, y_pred=self(x, training=True))
        none_grad = tape.gradient(loss, [self.w, self.v, self.unused])[2]
        grads = tape.gradient(loss, [self.w, self.v, self.unused], unconnected_gradients="zero")
        assert none_grad is None and float(grads[2].abs().sum()) == 0.0
        self.optimizer.apply_gradients(zip(grads[:2], [self.w, self.v]))
        self.optimizer.apply_gradients(zip([None] + grads[2:], [self.w, self.unused]))
        return {"loss": loss}


CASES = [InitWeights, BuildWeights, VariableAttributes, EncoderHead, TwoOptimizers, WatchUnconnected]


@pytest.mark.parametrize("make", CASES, ids=[c.__name__ for c in CASES])
def test_attribute_weights_train_as_on_one_device(make):
    runs = _fit_both(make)
    _assert_same(runs)
    replicated = runs[1][0]
    for w in replicated.weights:   # every replica's copy holds the same value
        copies = [c.detach().numpy() for c in getattr(w, "values", [w])]
        for c in copies[1:]:
            np.testing.assert_array_equal(copies[0], c)


class Scale(layers.Layer):
    """Reads a non-trainable weight that a callback sets between epochs with ``set_weights``."""

    def build(self, input_shape):
        self.scale = self.add_weight(shape=(), initializer="ones", trainable=False, name="scale")

    def call(self, x):
        return x * self.scale


class ScaledNet(_Step):
    def __init__(self):
        super().__init__()
        self.scaler = Scale()
        self.out = layers.Dense(1)

    def call(self, x):
        return self.out(self.scaler(x))

    def _pick(self):
        return self.trainable_variables


class SetScale(md.keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        self.model.scaler.set_weights([np.asarray(0.5 * (epoch + 2), "float32")])


def test_non_trainable_weight_set_between_epochs_reaches_every_replica():
    runs = _fit_both(ScaledNet, epochs=3, callbacks=[SetScale()])
    _assert_same(runs, trained=False)
    for model, _, _ in runs:
        np.testing.assert_allclose(model.scaler.get_weights()[0], 2.0)


def _counter_model(kind, aggregation):
    class Counted(InitWeights):
        def __init__(self):
            super().__init__()
            kw = {} if aggregation is None else {"aggregation": aggregation}
            if kind == "md.Variable":
                self.counter = md.Variable(0.0, trainable=False, **kw)
            else:
                self.counter = self.add_weight(name="counter", shape=(), initializer="zeros", trainable=False, **kw)

        def train_step(self, data):
            logs = super().train_step(data)
            self.counter.assign_add(1.0)
            return logs

    return Counted


# tf-keras under TF 2.21, MirroredStrategy on 2 logical CPUs (record_train_step_counter.py)
_TF = json.loads((Path(__file__).parent / "tf_2.21_train_step_counter.json").read_text())
TF_COUNTER = {None: _TF["default"], **{a: _TF[a] for a in ("NONE", "ONLY_FIRST_REPLICA", "MEAN", "SUM")}}
TF_VARIABLE = {None: _TF["tf.Variable NONE"], **{a: _TF[f"tf.Variable {a}"] for a in TF_COUNTER if a}}


@pytest.mark.parametrize("kind", ["add_weight", "md.Variable"])
@pytest.mark.parametrize("aggregation", list(TF_COUNTER))
def test_counter_assigned_in_train_step_follows_tensorflow(kind, aggregation):
    """``self.counter.assign_add(1.)`` in a ``train_step``: every replica's copy counts the 4 steps of one
    epoch (NONE: each its own; MEAN, ONLY_FIRST_REPLICA: the agreed value), SUM of a Python number raises."""
    x, y = _data()
    strategy = md.distribute.MirroredStrategy(DEVICES)
    with strategy.scope():
        model = _counter_model(kind, aggregation)()
        model.compile(optimizer=md.keras.optimizers.SGD(0.05), loss="mse")
    tf = (TF_COUNTER if kind == "add_weight" else TF_VARIABLE)[aggregation]
    if "error" in tf:
        with pytest.raises(ValueError, match="cannot be reduced with the given reduce op ReduceOp.SUM"):
            model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
        return
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    assert [float(c) for c in strategy.experimental_local_results(model.counter)] == tf["copies"]
    assert float(model.counter.numpy()) == tf["counter"]
