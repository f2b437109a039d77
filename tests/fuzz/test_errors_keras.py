"""md.keras's bad input: TensorFlow 2.21's exception type, the value received in the message, and
nothing changed (weights, optimizer steps, the compiled loss) after the error.

Expected types were read from TensorFlow 2.21 (Keras 3, and tf-keras 2 with TF_USE_LEGACY_KERAS=1)
running the same calls; where the two Keras differ the comment says which md.keras follows:
  compile: unknown optimizer / loss / metric names and loss_weights='x'   ValueError (Keras 3 refuses
           unknown losses and metrics only when fit runs; md.keras at compile, the same type)
  fit: validation_split or y with a dataset, x/y length mismatch, y missing, wrong input shape,
       x='abc'                                                               ValueError
  fit / evaluate / predict of an infinite dataset without steps           ValueError (tf-keras 2;
           Keras 3 runs forever)
  class_weight='x'                                                       AttributeError in both (an
           internal error): md.keras says TypeError; a negative key ValueError
  Dense / Conv2D / Embedding / LSTM / pooling sizes <= 0                 ValueError
  set_weights: wrong count or shapes ValueError, None TypeError (weights unchanged in TF too)
  load_weights of a file of another architecture: Keras 3 changes some weights and raises ValueError,
           or loads what matches silently; md.keras raises ValueError and changes none
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import multidev as md
from tests.fuzz._checks import check_error

L = md.keras.layers
X, Y = np.ones((8, 2), np.float32), np.ones((8, 1), np.float32)


def _raises(fn, error, *shown):
    with pytest.raises(error) as info:
        fn()
    check_error(info.value, *shown)
    return info.value


def _model():
    model = md.keras.Sequential([md.keras.Input((2,)), L.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", metrics=["mae"])
    return model


def _state(model):
    """Everything a failed call must leave as it was."""
    return ([w.copy() for w in model.get_weights()], int(model.optimizer.iterations), model.optimizer,
            model.compiled_loss, model.compiled_metrics)


def _assert_unchanged(model, before):
    weights, iterations, optimizer, loss, metrics = _state(model)
    for a, b in zip(before[0], weights):
        np.testing.assert_array_equal(a, b)
    assert (iterations, optimizer, loss, metrics) == (before[1], before[2], before[3], before[4])


def _dataset():
    return md.data.Dataset.from_tensor_slices((X, Y)).batch(4)


COMPILE_CASES = [
    ({"optimizer": "sgdx", "loss": "mse"}, ValueError, "sgdx"),
    ({"optimizer": 3, "loss": "mse"}, ValueError, 3),
    ({"optimizer": "adam", "loss": "msex"}, ValueError, "msex"),
    ({"optimizer": "adam", "loss": "mse", "metrics": ["accx"]}, ValueError, "accx"),
    ({"optimizer": "adam", "loss": "mse", "loss_weights": "x"}, ValueError, "x"),
    ({"optimizer": "adam", "loss": "mse", "loss_weights": [None, "x"]}, ValueError, "x"),
    ({"optimizer": "adam", "loss": "mse", "foo": 1}, TypeError, "foo"),
]


@pytest.mark.parametrize("kwargs, error, shown", COMPILE_CASES, ids=[str(c[0]) for c in COMPILE_CASES])
def test_a_failed_compile_keeps_the_previous_one(kwargs, error, shown):
    model = _model()
    before = _state(model)
    _raises(lambda: model.compile(**kwargs), error, shown)
    _assert_unchanged(model, before)
    assert model.fit(X, Y, verbose=0).history.keys() == {"loss", "mae"}   # still compiled as before


def test_loss_weights_take_numpy_numbers_and_a_one_element_list():
    model = _model()
    model.compile(optimizer="sgd", loss="mse", loss_weights=np.float32(0.5))
    half = model.evaluate(X, Y, verbose=0)
    model.compile(optimizer="sgd", loss="mse", loss_weights=[0.5])
    assert model.evaluate(X, Y, verbose=0) == pytest.approx(half)
    model.compile(optimizer="sgd", loss="mse")
    assert model.evaluate(X, Y, verbose=0) == pytest.approx(2 * half)


FIT_CASES = [
    ("validation_split with a dataset", lambda m: m.fit(_dataset(), validation_split=0.5, verbose=0), ValueError, None),
    ("y with a dataset", lambda m: m.fit(_dataset(), Y, verbose=0), ValueError, None),
    ("x/y lengths", lambda m: m.fit(X, Y[:5], verbose=0), ValueError, 5),
    ("y missing", lambda m: m.fit(X, verbose=0), ValueError, None),
    ("input shape", lambda m: m.fit(np.ones((8, 3), np.float32), Y, verbose=0), ValueError, (8, 3)),
    ("x a string", lambda m: m.fit("abc", Y, verbose=0), ValueError, "abc"),
    ("x strings", lambda m: m.fit(np.array([["a", "b"]] * 8), Y, verbose=0), ValueError, None),
    ("infinite fit", lambda m: m.fit(_dataset().repeat(), verbose=0), ValueError, None),
    ("infinite validation", lambda m: m.fit(X, Y, validation_data=_dataset().repeat(), verbose=0), ValueError, None),
    ("infinite evaluate", lambda m: m.evaluate(_dataset().repeat(), verbose=0), ValueError, None),
    ("infinite predict", lambda m: m.predict(_dataset().repeat(), verbose=0), ValueError, None),
    ("class_weight str", lambda m: m.fit(X, Y, class_weight="x", verbose=0), TypeError, "x"),
    ("class_weight list", lambda m: m.fit(X, Y, class_weight=[1.0, 2.0], verbose=0), TypeError, [1.0, 2.0]),
    ("class_weight key", lambda m: m.fit(X, Y, class_weight={-1: 2.0}, verbose=0), ValueError, -1),
    ("class_weight key str", lambda m: m.fit(X, Y, class_weight={"a": 2.0}, verbose=0), ValueError, "a"),
    ("class_weight value", lambda m: m.fit(X, Y, class_weight={0: "a"}, verbose=0), TypeError, "a"),
    ("train_on_batch class_weight", lambda m: m.train_on_batch(X, Y, class_weight="x"), TypeError, "x"),
    ("evaluate input shape", lambda m: m.evaluate(np.ones((8, 3), np.float32), Y, verbose=0), ValueError, (8, 3)),
    ("predict input shape", lambda m: m.predict(np.ones((8, 3), np.float32), verbose=0), ValueError, (8, 3)),
]


@pytest.mark.parametrize("name, call, error, shown", FIT_CASES, ids=[c[0] for c in FIT_CASES])
def test_fit_evaluate_predict_refuse_before_anything_changes(name, call, error, shown):
    model = _model()
    model.fit(X, Y, epochs=1, verbose=0)        # metrics hold a state that a failed call must not reset
    before, metric_state = _state(model), model.get_metrics_result()
    err = _raises(lambda: call(model), error, *([] if shown is None else [shown]))
    if "infinite" in name:
        assert "steps" in str(err) and "repeat()" in str(err)
    _assert_unchanged(model, before)
    if name not in _IN_THE_STEP:      # refused before the loop began: not even the metrics were reset
        assert model.get_metrics_result() == metric_state


# Found by the first step (the loop has begun and reset the metrics, as in TensorFlow): a custom
# train_step may need no y, and the input shape is the model's to check.
# (text reaches the model's first layer, which takes it when it maps strings: a Dense says why it cannot, in the step)
_IN_THE_STEP = {"y missing", "input shape", "evaluate input shape", "predict input shape", "x strings"}


def test_the_neighbouring_calls_still_work():
    """What the refusals above must not catch: finite datasets, numpy keys, steps with a repeat."""
    model = _model()
    assert len(model.fit(_dataset(), batch_size=4, verbose=0).history["loss"]) == 1   # batch_size ignored, as TF
    model.fit(_dataset().repeat(), steps_per_epoch=np.int64(2), epochs=2, verbose=0)
    assert int(model.optimizer.iterations) == 1 * 2 + 4
    assert len(model.evaluate(_dataset().repeat(), steps=2, verbose=0)) == 2     # loss, mae
    assert model.predict(_dataset().repeat(), steps=2, verbose=0).shape == (8, 1)
    model.fit(X, Y, validation_data=_dataset().repeat(), validation_steps=1, verbose=0)
    labels = np.array([0, 1] * 4, np.float32)[:, None]
    model.fit(X, labels, class_weight={np.int64(0): 1.0, 1: np.float32(2.0)}, verbose=0)
    model.fit(X, labels, class_weight={5: 1.0}, verbose=0)   # an absent class weighs nothing, as Keras 3


LAYER_CASES = [
    (lambda: L.Dense(0), 0), (lambda: L.Dense(-1), -1), (lambda: L.Dense("a"), "a"), (lambda: L.Dense(1.5), 1.5),
    (lambda: L.Conv2D(0, 3), 0), (lambda: L.Conv2D(2, 0), 0), (lambda: L.Conv1D(2, 3, strides=0), 0),
    (lambda: L.Conv2D(2, (3, -1)), (3, -1)), (lambda: L.Conv2D(2, "a"), "a"), (lambda: L.Conv2DTranspose(0, 3), 0),
    (lambda: L.SeparableConv2D(4, 3, depth_multiplier=0), 0), (lambda: L.Embedding(0, 3), 0),
    (lambda: L.Embedding(3, -2), -2), (lambda: L.LSTM(0), 0), (lambda: L.GRU(-1), -1), (lambda: L.SimpleRNN(0), 0),
    (lambda: L.LSTMCell(0), 0), (lambda: L.MaxPooling2D(0), 0), (lambda: L.AveragePooling1D(2, strides=0), 0),
    (lambda: L.Dropout(2.0), 2.0),
]


@pytest.mark.parametrize("make, shown", LAYER_CASES, ids=[str(i) for i in range(len(LAYER_CASES))])
def test_layer_sizes_must_be_positive(make, shown):
    _raises(make, ValueError, shown)


def test_a_dropout_rate_of_another_type():
    _raises(lambda: L.Dropout("a"), TypeError, "a")          # TF 2.21: a bare TypeError from `<=`
    assert L.Dropout(np.float32(0.5)).rate == 0.5


def test_layer_sizes_take_numpy_integers_and_zero_output_padding():
    n = np.int64(2)
    assert L.Conv2D(n, n, strides=np.int32(1)).filters == 2 and L.Embedding(n, n).input_dim == 2
    assert L.LSTM(n).units == 2 and L.MaxPooling2D(n).pool_size == (2, 2)
    assert L.Conv2DTranspose(2, 3, strides=2, output_padding=0)(torch.ones(1, 4, 4, 1)).shape == (1, 9, 9, 2)


@pytest.mark.parametrize("weights, error, shown", [
    (lambda w: w[:1], ValueError, None), (lambda w: w + w, ValueError, None),
    (lambda w: [np.ones((3, 1)), w[1]], ValueError, (3, 1)), (lambda w: None, TypeError, None),
    (lambda w: "ab", TypeError, "ab"), (lambda w: [w[0] + 1, np.array(["a"])], TypeError, None),
], ids=["fewer", "more", "shape", "None", "str", "strings of the right shape"])
def test_set_weights_changes_nothing_when_it_refuses(weights, error, shown):
    model = _model()
    before = _state(model)
    _raises(lambda: model.set_weights(weights(model.get_weights())), error, *([] if shown is None else [shown]))
    _assert_unchanged(model, before)


def test_load_weights_of_another_architecture_changes_nothing(tmp_path):
    model = _model()
    before = _state(model)
    other = md.keras.Sequential([md.keras.Input((3,)), L.Dense(1)])
    other.save_weights(tmp_path / "other.weights.h5")
    deeper = md.keras.Sequential([md.keras.Input((2,)), L.Dense(1), L.Dense(1)])
    deeper.save_weights(tmp_path / "deeper.weights.h5")
    for name in ("other.weights.h5", "deeper.weights.h5"):
        _raises(lambda: model.load_weights(tmp_path / name), ValueError, str(tmp_path / name))
        _assert_unchanged(model, before)
    with pytest.raises(FileNotFoundError, match="missing.weights.h5"):      # Keras 3's type too
        model.load_weights(tmp_path / "missing.weights.h5")
    _assert_unchanged(model, before)
