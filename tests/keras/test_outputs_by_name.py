"""A model's outputs, targets and sample weights are paired by output name: a dict of outputs written out of
sorted order (``{"zz": .., "bb": ..}``), a dict of targets in another order than the outputs, and sample
weights per output (a dict by name or a list) train as on TensorFlow. md paired them by position: the losses
went to the wrong outputs (a shape error, or silently wrong where shapes agree), and per-output sample
weights failed converting to one array. Numbers from TF 2.21 (tf.keras 2 and Keras 3 alike; the log names
are Keras 3's, the dict's keys)."""

import numpy as np
import pytest

import multidev as md

X = np.random.RandomState(0).randn(12, 4).astype("float32")
Y, YB = np.arange(12) % 3, X[:, :1]
SW = np.linspace(0.2, 1.8, 12).astype("float32")


def _model(outputs):
    inp = md.keras.Input(shape=(4,))
    hidden = md.keras.layers.Dense(6, activation="relu")(inp)
    a, b = md.keras.layers.Dense(3, name="a")(hidden), md.keras.layers.Dense(1, name="b")(hidden)
    model = md.keras.Model(inp, {"zz": a, "bb": b} if outputs == "dict" else [a, b])
    model.set_weights([(np.sin(np.arange(w.size) * 0.7 + i) * 0.3).reshape(w.shape).astype(w.dtype)
                       for i, w in enumerate(model.get_weights())])
    return model


def _last(history):
    return {k: round(v[-1], 5) for k, v in history.history.items()}


def _scope(replicas):
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]) if replicas == 2 else md.distribute.get_strategy()
    return strategy.scope()


@pytest.mark.parametrize("replicas", [1, 2])
def test_dict_outputs_targets_and_weights_pair_by_name(replicas):
    with _scope(replicas):
        model = _model("dict")
        model.compile(md.keras.optimizers.SGD(0.1), weighted_metrics={"zz": ["accuracy"]},
                      loss={"zz": md.keras.losses.SparseCategoricalCrossentropy(from_logits=True), "bb": "mse"})
    ds = md.data.Dataset.from_tensor_slices((X, {"bb": YB, "zz": Y}, {"bb": SW, "zz": SW[::-1].copy()})).batch(6)
    got = _last(model.fit(ds, epochs=2, verbose=0))
    want = {"bb_loss": 1.52543, "loss": 2.62612, "zz_accuracy": 0.28485, "zz_loss": 1.10069}
    assert got.keys() == want.keys()
    np.testing.assert_allclose([got[k] for k in want], list(want.values()), rtol=2e-4)


@pytest.mark.parametrize("replicas", [1, 2])
def test_a_list_of_sample_weights_weighs_each_output(replicas):
    with _scope(replicas):
        model = _model("list")
        model.compile(md.keras.optimizers.SGD(0.1), weighted_metrics=[["accuracy"], []],
                      loss=[md.keras.losses.SparseCategoricalCrossentropy(from_logits=True), "mse"])
    got = _last(model.fit(X, [Y, YB], sample_weight=[SW, SW[::-1].copy()], batch_size=6, epochs=2, shuffle=False,
                          verbose=0))
    want = {"a_accuracy": 0.28485, "a_loss": 1.12313, "b_loss": 1.93433, "loss": 3.05746}
    assert got.keys() == want.keys()
    np.testing.assert_allclose([got[k] for k in want], list(want.values()), rtol=2e-4)


def test_array_targets_and_weights_by_name_in_any_order():
    model = _model("dict")
    model.compile(md.keras.optimizers.SGD(0.1), weighted_metrics={"zz": ["accuracy"], "bb": ["mae"]},
                  loss={"bb": "mse", "zz": md.keras.losses.SparseCategoricalCrossentropy(from_logits=True)})
    got = _last(model.fit(X, {"bb": YB, "zz": Y}, sample_weight={"bb": SW, "zz": SW[::-1].copy()}, batch_size=6,
                          epochs=2, shuffle=False, verbose=0))
    want = {"bb_loss": 1.52543, "bb_mae": 1.10427, "loss": 2.62612, "zz_accuracy": 0.28485, "zz_loss": 1.10069}
    assert got.keys() == want.keys()
    np.testing.assert_allclose([got[k] for k in want], list(want.values()), rtol=2e-4)
    with pytest.raises(ValueError, match=r"unexpected keys .*\['cc'\]"):
        model.fit(X, {"bb": YB, "zz": Y, "cc": Y}, verbose=0)


@pytest.mark.parametrize("wrap", [lambda w: w, lambda w: [w], lambda w: (w,)])
def test_one_output_takes_its_weights_in_a_one_element_list(wrap):
    """tf.keras 2: [0.47367, 0.06182] whether the weights are given bare or in a one-element list or tuple."""
    x = np.arange(12, dtype="float32").reshape(6, 2) / 10
    model = md.keras.Sequential([md.keras.Input(shape=(2,)), md.keras.layers.Dense(1, kernel_initializer="ones")])
    model.compile(md.keras.optimizers.SGD(0.1), "mse")
    h = model.fit(x, x.sum(1, keepdims=True) * 0.5, sample_weight=wrap(np.linspace(0.5, 1.5, 6).astype("float32")),
                  batch_size=3, epochs=2, shuffle=False, verbose=0)
    np.testing.assert_allclose(h.history["loss"], [0.47367, 0.06182], rtol=2e-4)
