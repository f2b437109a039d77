"""``md.data`` datasets given to Keras 3's ``fit``/``evaluate``/``predict`` (keras.io's distributed guide typed
with ``tf.`` -> ``md.``), as Keras on TensorFlow takes ``tf.data``: each element is a batch, ``class_weight``
becomes sample weights as Keras computes them, ``y`` beside a dataset is refused. The same program on 2
replicas is tests/programs/keras/p29 and p37."""

from __future__ import annotations

import numpy as np
import pytest

import multidev as md
from tests.integrations._keras3_env import import_keras3

keras = import_keras3()


@pytest.fixture(autouse=True, scope="module")
def _installed():
    with md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]).scope():   # multidev imported first: its scope installs
        pass


def _model():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(3)(inputs))
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def _data(n=20):
    rng = np.random.RandomState(0)
    return rng.rand(n, 4).astype("float32"), rng.randint(0, 3, n)


def test_fit_evaluate_predict_on_an_md_dataset_equal_arrays_with_class_weight():
    x, y = _data()
    weights = {0: 1.0, 1: 3.0, 2: 0.5}
    by_arrays, by_dataset = _model(), _model()
    expected = by_arrays.fit(x, y, batch_size=8, epochs=2, class_weight=weights, shuffle=False, verbose=0).history
    dataset = md.data.Dataset.from_tensor_slices((x, y)).batch(8)   # 8, 8, 4: a partial last batch
    history = by_dataset.fit(dataset, epochs=2, class_weight=weights, validation_data=dataset, verbose=0).history
    for key in ("loss", "accuracy"):
        np.testing.assert_allclose(history[key], expected[key], rtol=1e-6)
    assert len(history["val_loss"]) == 2
    np.testing.assert_allclose(by_dataset.evaluate(dataset, verbose=0), by_arrays.evaluate(x, y, verbose=0), rtol=1e-6)
    np.testing.assert_allclose(by_dataset.predict(dataset, verbose=0), by_arrays.predict(x, verbose=0), rtol=1e-6)


def test_a_dataset_of_unknown_length_is_read_to_its_end_every_epoch():
    x, y = _data()
    dataset = md.data.Dataset.from_tensor_slices((x, y)).filter(lambda a, b: b >= 0).batch(8)
    assert dataset.cardinality() == md.data.UNKNOWN_CARDINALITY
    seen = []
    counter = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: seen.append(batch))
    _model().fit(dataset, epochs=2, verbose=0, callbacks=[counter])
    assert seen == [0, 1, 2, 0, 1, 2]


def test_targets_beside_a_dataset_are_refused_with_the_fix():
    x, y = _data()
    dataset = md.data.Dataset.from_tensor_slices(x).batch(8)
    with pytest.raises(ValueError, match=r"md.data.Dataset, `y` should not be passed .*from_tensor_slices\(\(x, y"):
        _model().fit(dataset, y, verbose=0)


def test_class_weight_needs_inputs_and_targets():
    x, _ = _data()
    with pytest.raises(ValueError, match="`class_weight` needs a md.data.Dataset of \\(inputs, targets\\)"):
        _model().fit(md.data.Dataset.from_tensor_slices(x).batch(8), class_weight={0: 1.0}, verbose=0)


def test_auto_shard_off_steps_recut_rows_across_batches_as_tensorflow():
    """6 examples in batches of 4, repeated twice, auto-sharding OFF, 2 replicas: TF 2.21's fit steps over
    rows 0-3, 4 5 0 1, 2-5 (three steps an epoch; before: four, the partial batches alone). Weights, losses
    and evaluate give TF's recorded numbers (tests/conformance/cases/distributed_pipeline.py)."""
    import json
    import os
    record = os.path.join(os.path.dirname(__file__), "..", "conformance", "tf_2.21.json")
    with open(record) as f:
        expected = json.load(f)["cases"]["distributed_pipeline.fit_finite_batch_repeat_auto_shard_off"]
    x = [[float(i % 5) - 2.0, float((i * 3) % 7) / 7.0] for i in range(6)]
    y = [[float(i % 3)] for i in range(6)]
    options = md.data.Options()
    options.experimental_distribute.auto_shard_policy = md.data.experimental.AutoShardPolicy.OFF
    dataset = md.data.Dataset.from_tensor_slices((x, y)).batch(4).repeat(2).with_options(options)
    with md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]).scope():
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(
            1, kernel_initializer=keras.initializers.Constant(0.5), bias_initializer="zeros")])
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse", metrics=["mae"])
    seen = []
    counter = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: seen.append(batch))
    with pytest.warns(UserWarning, match="ran out of data"):   # Keras's note on the first pass of unknown length
        history = model.fit(dataset, epochs=2, verbose=0, callbacks=[counter]).history
    assert seen == [0, 1, 2, 0, 1, 2]
    np.testing.assert_allclose(history["loss"], expected[0], rtol=1e-5)
    np.testing.assert_allclose(history["mae"], expected[1], rtol=1e-5)
    np.testing.assert_allclose([keras.ops.convert_to_numpy(w).tolist() for w in model.trainable_variables][0],
                               expected[2][0], rtol=1e-5)
    np.testing.assert_allclose(model.evaluate(dataset, verbose=0), expected[3], rtol=1e-5)
    endless = md.data.Dataset.from_tensor_slices(x[:5]).batch(4).repeat().with_options(options)
    assert model.predict(endless, steps=2, verbose=0).shape == (8, 1)   # rows 0-3, 4 0 1 2 (before: 5 rows)


def test_synchronized_batch_norm_refuses_a_step_that_leaves_a_replica_empty():
    """4 rows on 3 replicas are cut [2, 2, 0], as TF cuts them: a synchronized BatchNormalization would wait for
    the empty replica's moments, so the step is refused saying why (it checked only batches under 3 rows)."""
    with md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1", "/cpu:2"]).scope():
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2),
                                  keras.layers.BatchNormalization(synchronized=True)])
        model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((4, 2), "float32"), np.zeros((4, 2), "float32")
    with pytest.raises(ValueError, match=r"\[2, 2, 0\].*every replica needs at least one example"):
        model.fit(x, y, batch_size=4, epochs=1, verbose=0)
