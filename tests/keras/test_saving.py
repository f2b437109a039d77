"""save_weights/load_weights (Keras 3 names, safetensors content), save/load_model, bad checkpoints."""

import json
import os
import re

import numpy as np
import pytest
import torch

import multidev.keras as keras
from multidev.keras import layers, models


def make_model(units=8):
    model = models.Sequential([layers.Dense(units, activation="relu", input_shape=(4,)),
                               layers.BatchNormalization(), layers.Dense(2, activation="softmax")])
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def data():
    rng = np.random.RandomState(0)
    return rng.randn(32, 4).astype("float32"), rng.randint(0, 2, 32)


@pytest.mark.parametrize("name", ["ckpt.weights.h5", "ckpt.safetensors"])
def test_weights_file_has_exactly_the_name_given(tmp_path, monkeypatch, name):
    """Keras 3: save_weights("x.weights.h5") writes x.weights.h5 (multidev: safetensors inside)."""
    monkeypatch.chdir(tmp_path)
    x, y = data()
    model = make_model()
    model.fit(x, y, epochs=1, verbose=0)
    model.save_weights(name)
    assert os.listdir(tmp_path) == [name]
    raw = (tmp_path / name).read_bytes()
    header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
    assert header["__metadata__"]["format"] == "multidev.keras.weights/1"      # safetensors, not HDF5
    fresh = make_model()
    assert not np.allclose(fresh.predict(x, verbose=0), model.predict(x, verbose=0))
    fresh.load_weights(name)
    np.testing.assert_allclose(fresh.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)
    for a, b in zip(fresh.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)             # moving statistics included


@pytest.mark.parametrize("name", ["ckpt.h5", "ckpt.weights", "ckpt.keras", "ckpt.pt"])
def test_weights_names_without_a_valid_suffix_raise(tmp_path, name):
    """Keras 3 raises ValueError unless the name ends in .weights.h5; multidev also takes .safetensors
    (and a name without any suffix, Keras 2's checkpoint prefix: tests/keras/test_save_weights_prefix.py)."""
    model = make_model()
    path = str(tmp_path / name)
    with pytest.raises(ValueError, match=r"must end in `\.weights\.h5` \(Keras 3\) or `\.safetensors`.*"
                                         + re.escape(repr(path))):
        model.save_weights(path)
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError, match="must end in"):
        model.load_weights(path)


def test_mismatched_checkpoint_lists_all_problems_and_changes_nothing(tmp_path):
    path = str(tmp_path / "w.weights.h5")
    make_model(units=8).save_weights(path)
    other = make_model(units=6)
    before = other.get_weights()
    with pytest.raises(ValueError) as err:
        other.load_weights(path)
    msg = str(err.value)
    assert "mismatch(es)" in msg and "layers.0.kernel: model (4, 6) vs file (4, 8)" in msg
    assert "layers.1.moving_mean" in msg and "layers.2.kernel" in msg
    for a, b in zip(before, other.get_weights()):
        np.testing.assert_array_equal(a, b)
    extra = models.Sequential([layers.Dense(8, input_shape=(4,))])
    with pytest.raises(ValueError, match="not in model: layers.1.gamma"):
        extra.load_weights(path)


def test_corrupt_and_truncated_files(tmp_path):
    path = str(tmp_path / "w.safetensors")
    model = make_model()
    model.save_weights(path)
    data_bytes = open(path, "rb").read()
    before = model.get_weights()
    for broken in (data_bytes[: len(data_bytes) // 2], b"not a checkpoint at all", b""):
        with open(path, "wb") as f:
            f.write(broken)
        with pytest.raises(ValueError, match="corrupt, truncated or not a safetensors file.*not changed"):
            model.load_weights(path)
    for a, b in zip(before, model.get_weights()):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(FileNotFoundError, match="missing.weights.h5"):
        model.load_weights(str(tmp_path / "missing.weights.h5"))


@pytest.mark.parametrize("name", ["saved_model", "saved.keras"])
def test_save_and_load_model_with_optimizer_state(tmp_path, name):
    x, y = data()
    model = make_model()
    model.fit(x, y, epochs=2, verbose=0)
    path = str(tmp_path / name)
    model.save(path)
    restored = models.load_model(path)
    assert type(restored) is models.Sequential and restored.name == model.name
    np.testing.assert_allclose(restored.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)
    assert int(restored.optimizer.iterations) == int(model.optimizer.iterations) == 2
    model.fit(x, y, epochs=1, verbose=0, shuffle=False)
    restored.fit(x, y, epochs=1, verbose=0, shuffle=False)
    np.testing.assert_allclose(restored.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-5)
    assert not any(f.endswith(".pkl") for f in (os.listdir(path) if os.path.isdir(path) else []))


def test_functional_model_config_round_trip(tmp_path):
    inp = layers.Input(shape=(6, 3))
    shared = layers.Dense(4)
    x = layers.LSTM(5, return_sequences=True)(inp)
    x = layers.Add()([shared(layers.GlobalMaxPooling1D()(x)), shared(layers.GlobalAveragePooling1D()(x))])
    model = keras.Model(inputs=inp, outputs=layers.Dense(1)(x))
    model.save(str(tmp_path / "f"))
    restored = models.load_model(str(tmp_path / "f"))
    xs = np.random.randn(3, 6, 3).astype("float32")
    np.testing.assert_allclose(restored.predict(xs, verbose=0), model.predict(xs, verbose=0), atol=1e-6)
    assert len(restored.weights) == len(model.weights)


def test_custom_layers_need_custom_objects(tmp_path):
    class Scale(layers.Layer):
        def __init__(self, factor=2.0, **kwargs):
            super().__init__(**kwargs)
            self.factor = factor

        def call(self, x):
            return x * self.factor

        def get_config(self):
            return {**super().get_config(), "factor": self.factor}

    model = models.Sequential([layers.Dense(2, input_shape=(3,)), Scale(3.0)])
    model.save(str(tmp_path / "c"))
    with pytest.raises(ValueError, match="Unknown layer: 'Scale'.*custom_objects"):
        models.load_model(str(tmp_path / "c"))
    restored = models.load_model(str(tmp_path / "c"), custom_objects={"Scale": Scale})
    assert restored.layers[1].factor == 3.0


def test_subclassed_model_saves_weights_but_not_config(tmp_path):
    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.d = layers.Dense(2)

        def call(self, x):
            return self.d(x)

    net = Net()
    net(torch.ones(1, 3))
    net.save_weights(str(tmp_path / "n.weights.h5"))
    other = Net()
    other(torch.ones(1, 3))
    other.load_weights(str(tmp_path / "n.weights.h5"))
    torch.testing.assert_close(other.d.kernel, net.d.kernel)
    with pytest.raises(ValueError, match="defined inside a function.*get_config"):
        net.save(str(tmp_path / "full.keras"))      # a local class could not be imported on load


def test_every_builtin_layer_config_round_trips():
    seq = models.Sequential([
        layers.Embedding(50, 4, input_length=12), layers.Conv1D(6, 3, padding="same", activation="relu"),
        layers.BatchNormalization(momentum=0.9), layers.MaxPooling1D(2), layers.AveragePooling1D(1),
        layers.Bidirectional(layers.LSTM(3, return_sequences=True)), layers.GRU(4, return_sequences=True),
        layers.LayerNormalization(), layers.Dropout(0.1), layers.GlobalMaxPooling1D(), layers.Reshape((2, 2)),
        layers.Flatten(), layers.Activation("tanh"), layers.Dense(3, activation="softmax")])
    clone = models.clone_model(seq)
    assert [type(l) for l in clone.layers] == [type(l) for l in seq.layers]
    assert [w.shape for w in clone.weights] == [w.shape for w in seq.weights]
    assert clone.layers[2].momentum == 0.9 and clone.layers[5].merge_mode == "concat"
    img = models.Sequential([layers.Conv2D(2, 3, input_shape=(8, 8, 1)), layers.MaxPool2D(),
                             layers.GlobalAveragePooling2D()])
    assert models.clone_model(img).count_params() == img.count_params() == 20
