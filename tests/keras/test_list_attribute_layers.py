"""Layers inside a list attribute that also holds other values are tracked, as Keras tracks them: keras.io's
Forward-Forward network keeps ``self.layer_list = [keras.Input(shape=(784,))]``, adds ``self.layer_list +=
[FFDense(...)]`` and trains ``for layer in self.layers`` in its ``train_step``. Before: ``model.layers`` was empty
and the layers' weights were not the model's (the step trained nothing, silently)."""

import os

import numpy as np
import pytest

import multidev as md

K = md.keras


class FFDense(K.layers.Layer):
    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.dense = K.layers.Dense(units=units)

    def call(self, x):
        return self.dense(x)


class FFNetwork(K.Model):
    def __init__(self, dims):
        super().__init__()
        self.layer_list = [K.Input(shape=(dims[0],))]
        for d in range(len(dims) - 1):
            self.layer_list += [FFDense(dims[d + 1])]

    def call(self, x):
        for layer in self.layer_list[1:]:
            x = layer(x)
        return x


def test_forward_forward_list_is_tracked():
    model = FFNetwork([4, 3, 2])
    assert [type(layer).__name__ for layer in model.layers] == ["FFDense", "FFDense"]
    assert isinstance(model.layer_list, list) and type(model.layer_list[0]).__name__ == "KerasTensor"
    model(np.zeros((2, 4), "float32"))
    assert len(model.trainable_weights) == 4 and len(model.weights) == 4
    assert sum(w.numel() for w in model.trainable_weights) == model.count_params() == 4 * 3 + 3 + 3 * 2 + 2


def test_the_train_step_over_self_layers_trains_them():
    model = FFNetwork([4, 3, 2])
    model.compile(optimizer=K.optimizers.SGD(0.1), loss="mse")
    model(np.zeros((1, 4), "float32"))
    before = [w.numpy().copy() for w in model.layers[0].weights]
    model.fit(np.ones((4, 4), "float32"), np.ones((4, 2), "float32"), epochs=1, verbose=0)
    assert all(np.abs(w.numpy() - b).max() > 0 for w, b in zip(model.layers[0].weights, before))


@pytest.mark.parametrize("edit,want", [
    (lambda lst, new: lst.append(new), 3), (lambda lst, new: lst.extend([new, "x"]), 3),
    (lambda lst, new: lst.insert(1, new), 3), (lambda lst, new: lst.pop(), 1),
    (lambda lst, new: lst.remove(lst[1]), 1), (lambda lst, new: lst.__setitem__(1, new), 2),
    (lambda lst, new: lst.__delitem__(slice(1, None)), 0), (lambda lst, new: lst.clear(), 0),
], ids=["append", "extend", "insert", "pop", "remove", "setitem", "delitem", "clear"])
def test_list_edits_keep_the_layers(edit, want):
    model = FFNetwork([4, 3, 2])
    new = FFDense(5, name="new")
    edit(model.layer_list, new)
    assert len(model.layers) == want
    assert all(any(layer is v for v in model.layer_list) for layer in model.layers)


def test_reassigning_other_values_drops_them():
    model = FFNetwork([4, 3, 2])
    model.layer_list = ["no", "layers"]
    assert model.layers == [] and model.layer_list == ["no", "layers"]
    model.layer_list = ("a", FFDense(2))
    assert len(model.layers) == 1 and isinstance(model.layer_list, tuple)


def test_weights_save_and_load(tmp_path):
    model = FFNetwork([4, 3, 2])
    x = np.random.RandomState(0).rand(2, 4).astype("float32")
    want = np.asarray(model(x))
    path = os.path.join(tmp_path, "ff.weights.h5")
    model.save_weights(path)
    other = FFNetwork([4, 3, 2])
    other(x)
    other.load_weights(path)
    np.testing.assert_array_equal(np.asarray(other(x)), want)


class Blocks(K.Model):
    def __init__(self):
        super().__init__()
        self.blocks = []
        for _ in range(2):
            self.blocks.append(K.layers.Dense(2))
        self.sizes = []   # a list that never holds layers stays a list of its values

    def call(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def test_empty_list_then_appended_layers():
    model = Blocks()
    model(np.zeros((1, 3), "float32"))
    assert len(model.layers) == 2 and len(model.trainable_weights) == 4
    model.sizes.append(3)
    assert model.sizes == [3] and len(model.layers) == 2
