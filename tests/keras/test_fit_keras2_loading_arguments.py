"""tf.keras 2's ``fit``/``evaluate``/``predict`` take ``workers``, ``use_multiprocessing`` and
``max_queue_size`` (how a Sequence's batches are fetched; its order is kept): a ported program passing them
trains as without them. md refused them as invalid keyword arguments. Other unknown arguments are still refused."""

import math

import numpy as np
import pytest

import multidev as md

LOADING = {"workers": 4, "use_multiprocessing": True, "max_queue_size": 5}


class Batches(md.keras.utils.Sequence):
    def __init__(self, x, y):
        super().__init__()
        self.x, self.y = x, y

    def __len__(self):
        return math.ceil(len(self.x) / 4)

    def __getitem__(self, i):
        return self.x[i * 4:(i + 1) * 4], self.y[i * 4:(i + 1) * 4]


def _trained(**loading):
    x = np.arange(20, dtype="float32").reshape(10, 2) / 10
    y = x.sum(1, keepdims=True)
    model = md.keras.Sequential([md.keras.Input(shape=(2,)), md.keras.layers.Dense(1, kernel_initializer="ones")])
    model.compile(md.keras.optimizers.SGD(0.05), "mse")
    h = model.fit(Batches(x, y), epochs=2, verbose=0, **loading)
    return h.history["loss"], model.evaluate(Batches(x, y), verbose=0, **loading), model.predict(x, verbose=0,
                                                                                                  **loading)


def test_keras2_loading_arguments_train_as_without_them():
    with_them, without = _trained(**LOADING), _trained()
    np.testing.assert_array_equal(with_them[0], without[0])
    assert with_them[1] == without[1]
    np.testing.assert_array_equal(with_them[2], without[2])


def test_other_unknown_arguments_are_refused():
    model = md.keras.Sequential([md.keras.Input(shape=(2,)), md.keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    with pytest.raises(TypeError, match=r"Invalid keyword argument\(s\) in `fit\(\)`: \['worker'\]"):
        model.fit(np.zeros((4, 2)), np.zeros((4, 1)), worker=2, verbose=0)
    with pytest.raises(TypeError, match=r"in `evaluate\(\)`: \['steps_per_epoch'\]"):
        model.evaluate(np.zeros((4, 2)), np.zeros((4, 1)), steps_per_epoch=2, verbose=0)
