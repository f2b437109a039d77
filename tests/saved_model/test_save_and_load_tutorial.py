"""TensorFlow's "Save and load a model using a distribution strategy" tutorial, tf. -> md.: Keras
``model.save``/``load_model`` and ``md.saved_model.save``/``load`` across strategies, saving "from a
local device" with ``SaveOptions``/``LoadOptions(experimental_io_device='/job:localhost')``, and
Keras 3's ``model.export`` (TensorFlow 2.21's way to write a SavedModel from Keras)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import multidev as md

tf = md


def get_model(strategy):
    with strategy.scope():
        torch.manual_seed(0)
        model = tf.keras.Sequential([
            tf.keras.layers.Conv2D(4, 3, activation='relu', input_shape=(8, 8, 1)),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(10)
        ])
        model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      optimizer=tf.keras.optimizers.Adam(),
                      metrics=[tf.metrics.SparseCategoricalAccuracy()])
        return model


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    x, y = rng.random((16, 8, 8, 1)).astype("float32"), rng.integers(0, 10, 16).astype("int64")
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(8), torch.from_numpy(x)


def test_keras_save_and_load_across_strategies_with_io_device_options(tmp_path, data):
    train_dataset, x = data
    mirrored_strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    model = get_model(mirrored_strategy)
    model.fit(train_dataset, epochs=1, verbose=0)
    save_options = tf.saved_model.SaveOptions(experimental_io_device='/job:localhost')
    model.save(str(tmp_path / "keras_save.keras"), options=save_options)
    another_strategy = tf.distribute.OneDeviceStrategy('/cpu:0')
    with another_strategy.scope():
        load_options = tf.saved_model.LoadOptions(experimental_io_device='/job:localhost')
        restored = tf.keras.models.load_model(str(tmp_path / "keras_save.keras"), options=load_options)
    assert int(restored.optimizer.iterations) == 2
    for a, b in zip(restored.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)
    restored.fit(train_dataset, epochs=1, verbose=0)
    assert int(restored.optimizer.iterations) == 4
    with pytest.raises(TypeError, match="LoadOptions"):
        tf.keras.models.load_model(str(tmp_path / "keras_save.keras"), options=save_options)
    with pytest.raises(ValueError, match="No model found"):        # TF 2.21: ValueError("File not found ...")
        tf.keras.models.load_model(str(tmp_path / "nope.keras"))


def test_saved_model_options_and_keras_export(tmp_path, data):
    _, x = data
    model = get_model(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
    save_options = tf.saved_model.SaveOptions(experimental_io_device='/job:localhost')
    tf.saved_model.save(model, str(tmp_path / "tf_save"), options=save_options)
    load_options = tf.saved_model.LoadOptions(experimental_io_device='/job:localhost')
    loaded = tf.saved_model.load(str(tmp_path / "tf_save"), options=load_options)
    expected = model(x).detach()
    torch.testing.assert_close(loaded.signatures['serving_default'](x)["output_0"], expected)
    with pytest.raises(TypeError, match="SaveOptions"):
        tf.saved_model.save(model, str(tmp_path / "bad"), options=load_options)
    with pytest.raises(ValueError, match="invalid VariablePolicy"):
        tf.saved_model.SaveOptions(experimental_variable_policy="bad")
    model.export(str(tmp_path / "exported"))
    exported = tf.saved_model.load(str(tmp_path / "exported"))
    assert sorted(exported.signatures) == ["serve", "serving_default"]
    torch.testing.assert_close(exported.serve(x), expected)
    model.save(str(tmp_path / "keras_dir"))       # the tutorial's "Keras Model.save, lower-level load" cell
    with pytest.raises(OSError, match="Keras model written by model.save.*model.export"):
        tf.saved_model.load(str(tmp_path / "keras_dir"))
    with pytest.raises(ValueError, match="format='onnx'"):
        model.export(str(tmp_path / "onnx"), format="onnx")
