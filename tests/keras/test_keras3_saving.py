"""Keras 3 file names for weights and checkpoints; subclassed models saved with ``.save("x.keras")`` (issue 17 #12)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import multidev as md
from multidev.keras import callbacks, layers


class TwoLayerNet(md.keras.Model):
    """A subclassed model without get_config (importable: defined at module level)."""

    def __init__(self, units=4):
        super().__init__()
        self.hidden = layers.Dense(units, activation="relu")
        self.out = layers.Dense(1)

    def call(self, x):
        return self.out(self.hidden(x))


class NeedsArgs(md.keras.Model):
    def __init__(self, units):
        super().__init__()
        self.d = layers.Dense(units)

    def call(self, x):
        return self.d(x)


def _data():
    rng = np.random.RandomState(0)
    x = rng.rand(32, 3).astype("float32")
    return x, x.sum(axis=1, keepdims=True)


def _sequential():
    model = md.keras.Sequential([layers.Input(shape=(3,)), layers.Dense(1)])
    model.compile("sgd", "mse")
    return model


def test_model_checkpoint_writes_exactly_the_keras3_name(tmp_path):
    """Keras 3: ModelCheckpoint("ckpt_{epoch:04d}.weights.h5") writes ckpt_0001.weights.h5, ..."""
    x, y = _data()
    model = _sequential()
    pattern = str(tmp_path / "ckpt_{epoch:04d}.weights.h5")
    model.fit(x, y, epochs=2, verbose=0, callbacks=[callbacks.ModelCheckpoint(pattern, save_weights_only=True)])
    assert sorted(os.listdir(tmp_path)) == ["ckpt_0001.weights.h5", "ckpt_0002.weights.h5"]
    fresh = _sequential()
    fresh.load_weights(str(tmp_path / "ckpt_0002.weights.h5"))
    np.testing.assert_array_equal(fresh.get_weights()[0], model.get_weights()[0])


def test_model_checkpoint_without_suffix_writes_keras2_checkpoints(tmp_path, monkeypatch):
    """TensorFlow's "Distributed training with Keras" tutorial as printed (tf.keras 2):
    ModelCheckpoint(filepath="./training_checkpoints/ckpt_{epoch}", save_weights_only=True), a relative
    directory, then model.load_weights(tf.train.latest_checkpoint(checkpoint_dir))."""
    monkeypatch.chdir(tmp_path)
    x, y = _data()
    model = _sequential()
    checkpoint_dir = "./training_checkpoints"
    prefix = os.path.join(checkpoint_dir, "ckpt_{epoch}")
    model.fit(x, y, epochs=2, verbose=0, callbacks=[callbacks.ModelCheckpoint(filepath=prefix, save_weights_only=True)])
    assert sorted(os.listdir(checkpoint_dir)) == ["checkpoint", "ckpt_1.data.safetensors", "ckpt_1.index",
                                                  "ckpt_2.data.safetensors", "ckpt_2.index"]
    latest = md.train.latest_checkpoint(checkpoint_dir)
    assert os.path.basename(latest) == "ckpt_2"
    trained = model.get_weights()
    model.fit(x, y, epochs=1, verbose=0)                 # move away, then come back
    model.load_weights(latest)
    for got, want in zip(model.get_weights(), trained):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["ckpt.h5", "ckpt_{epoch}.weights"])
def test_model_checkpoint_weights_only_needs_a_weights_suffix(tmp_path, name):
    """A suffix other than .weights.h5/.safetensors raises ValueError at construction (Keras 3's rule;
    no suffix at all is Keras 2's checkpoint prefix, above)."""
    path = str(tmp_path / name)
    with pytest.raises(ValueError, match=r"must end in\s+`\.weights\.h5`.*" + name.replace(".", r"\.").replace("{", r"\{")
                       .replace("}", r"\}")):
        callbacks.ModelCheckpoint(path, save_weights_only=True)


@pytest.mark.parametrize("name", ["net.keras", "net_dir"])
def test_subclassed_model_saves_and_loads_with_its_import_path(tmp_path, name):
    x, y = _data()
    net = TwoLayerNet()
    net.compile(md.keras.optimizers.Adam(0.01), "mse")
    net.fit(x, y, epochs=2, batch_size=8, verbose=0)
    path = str(tmp_path / name)
    net.save(path)
    restored = md.keras.models.load_model(path)
    assert type(restored) is TwoLayerNet
    np.testing.assert_allclose(restored.predict(x, verbose=0), net.predict(x, verbose=0), rtol=1e-6, atol=1e-7)
    assert restored.optimizer is not None and int(restored.optimizer.iterations) == int(net.optimizer.iterations)


def _saved_config(tmp_path) -> str:
    x, _ = _data()
    net = TwoLayerNet()
    net(x)
    path = str(tmp_path / "saved")
    net.save(path)
    return path


def test_saved_config_names_the_class_in_json_not_a_pickle(tmp_path):
    path = _saved_config(tmp_path)
    with open(os.path.join(path, "config.json")) as f:
        entry = json.load(f)["subclassed_model"]
    assert entry == {"module": __name__, "qualname": "TwoLayerNet",
                     "input_signature": {"shape": [None, 3], "dtype": "float32"}}


def test_unimportable_class_gives_a_clear_error_and_custom_objects_fix_it(tmp_path):
    path = _saved_config(tmp_path)
    config_path = os.path.join(path, "config.json")
    with open(config_path) as f:
        config = json.load(f)
    config["subclassed_model"]["module"] = "no_such_module_for_keras17"
    with open(config_path, "w") as f:
        json.dump(config, f)
    with pytest.raises(ValueError, match="no_such_module_for_keras17:TwoLayerNet.*custom_objects"):
        md.keras.models.load_model(path)
    restored = md.keras.models.load_model(path, custom_objects={"TwoLayerNet": TwoLayerNet})
    assert type(restored) is TwoLayerNet


def test_non_model_class_is_refused(tmp_path):
    path = _saved_config(tmp_path)
    config_path = os.path.join(path, "config.json")
    with open(config_path) as f:
        config = json.load(f)
    config["subclassed_model"].update(module="os", qualname="system")
    with open(config_path, "w") as f:
        json.dump(config, f)
    with pytest.raises(ValueError, match="not a md.keras.Model subclass"):
        md.keras.models.load_model(path)


def test_unbuilt_or_argument_needing_models_fail_at_save(tmp_path):
    with pytest.raises(ValueError, match="before it is built"):
        TwoLayerNet().save(str(tmp_path / "a.keras"))
    net = NeedsArgs(2)
    net(np.ones((1, 3), "float32"))
    with pytest.raises(ValueError, match=r"requires \['units'\].*get_config"):
        net.save(str(tmp_path / "b.keras"))
    assert os.listdir(tmp_path) == []
