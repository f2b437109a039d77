"""A Sequential model with a declared Input takes its input wrapped in a one-element list or tuple, as tf.keras's
graph flattens it: ``model([x])``, ``predict((x,))``, and a dataset of ``((features,), label)`` pairs in ``fit``.
md passed the list to the first layer (AttributeError: 'tuple' object has no attribute 'is_floating_point').
TF 2.21 (tf.keras 2): [[6, 6], [22, 22]] for the ones-initialised Dense below."""

import numpy as np

import multidev as md

X = np.arange(8, dtype="float32").reshape(2, 4)


def _model():
    return md.keras.Sequential([md.keras.Input(shape=(4,)), md.keras.layers.Dense(2, kernel_initializer="ones")])


def test_calls_and_predict_unwrap_a_one_element_input():
    model = _model()
    for wrapped in ([X], (X,)):
        np.testing.assert_array_equal(np.asarray(model(wrapped)), [[6, 6], [22, 22]])
        np.testing.assert_array_equal(model.predict(wrapped, verbose=0), [[6, 6], [22, 22]])


def test_fit_on_one_element_feature_tuples_trains_as_on_the_features():
    x = np.random.RandomState(0).randn(16, 4).astype("float32")
    y = x[:, :2] * 0.5
    histories = []
    for ds in (md.data.Dataset.from_tensor_slices(((x,), y)), md.data.Dataset.from_tensor_slices((x, y))):
        model = _model()
        model.compile(md.keras.optimizers.SGD(0.01), "mse")
        histories.append(model.fit(ds.batch(8), epochs=2, verbose=0).history["loss"])
    np.testing.assert_allclose(histories[0], histories[1], rtol=1e-6)
