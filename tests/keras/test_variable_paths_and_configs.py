"""Keras 3's variable attributes (``path`` 'sequential/dense/kernel', ``name``, ``trainable``, ``value``,
``numpy()``) and models rebuilt from ``get_config()`` (``Model.from_config`` of a functional config,
a subclassed model's ``{**super().get_config(), ...}``, ``clone_model``), as Keras 3.15 gives them."""

import numpy as np
import pytest
import torch

import multidev as md

K = md.keras
ONE = np.ones((1, 3), "float32")


class Sub(K.Model):
    def __init__(self, units=2, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.d = K.layers.Dense(units)
        self.bn = K.layers.BatchNormalization()

    def call(self, x):
        return self.bn(self.d(x))

    def get_config(self):
        return {**super().get_config(), "units": self.units}


def test_weight_paths_name_the_layers_that_made_them():
    seq = K.Sequential([K.Input((3,)), K.layers.Dense(2, name="a"), K.layers.Dense(1, name="b")], name="seq")
    assert [w.path for w in seq.weights] == ["seq/a/kernel", "seq/a/bias", "seq/b/kernel", "seq/b/bias"]
    lazy = K.Sequential([K.layers.Dense(2, name="c")], name="lazy")
    lazy(ONE)
    assert [w.path for w in lazy.weights] == ["lazy/c/kernel", "lazy/c/bias"]
    alone = K.layers.Dense(2, name="d")
    alone.build((None, 3))
    assert [w.path for w in alone.weights] == ["d/kernel", "d/bias"]
    inp = K.Input((3,))
    functional = K.Model(inp, K.layers.Dense(2, name="e")(inp))
    assert [w.path for w in functional.weights] == ["e/kernel", "e/bias"]          # built on Input, outside
    sub = Sub(name="sub")
    sub(ONE)
    assert [(w.path, w.trainable) for w in sub.weights][2:] == [
        ("sub/batch_normalization/gamma", True), ("sub/batch_normalization/beta", True),
        ("sub/batch_normalization/moving_mean", False), ("sub/batch_normalization/moving_variance", False)]
    kernel = seq.weights[0]
    assert kernel.name == "kernel" and kernel.value is kernel and kernel.numpy().shape == (3, 2)
    assert tuple(kernel.shape) == (3, 2) and kernel.dtype == torch.float32   # torch's dtype (Keras 3: 'float32')
    kernel.trainable = False
    assert not kernel.requires_grad and not kernel.trainable
    assert md.Variable(1.0, name="v").path == "v"


def test_paths_survive_a_strategy_and_copies():
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        seq = K.Sequential([K.Input((3,)), K.layers.Dense(2, name="a")], name="mirrored")
    assert [w.path for w in seq.weights] == ["mirrored/a/kernel", "mirrored/a/bias"]
    assert [w.path for w in K.models.clone_model(seq).weights] == ["mirrored/a/kernel", "mirrored/a/bias"]
    import copy
    assert [w.path for w in copy.deepcopy(seq).weights] == ["mirrored/a/kernel", "mirrored/a/bias"]


def test_models_rebuild_from_their_configs():
    inp = K.Input((3,))
    functional = K.Model(inp, K.layers.Dense(2)(K.layers.Dense(4)(inp)))
    again = K.Model.from_config(functional.get_config())
    assert type(again).__name__ == "Functional" and [tuple(w.shape) for w in again.weights] == [
        (3, 4), (4,), (4, 2), (2,)]
    assert again(ONE).numpy().shape == (1, 2)
    assert type(K.models.Model.from_config(functional.get_config(), custom_objects={})).__name__ == "Functional"
    seq = K.Sequential([K.Input((3,)), K.layers.Dense(2)])
    assert len(K.Sequential.from_config(seq.get_config()).weights) == 2
    assert len(K.models.clone_model(seq).weights) == 2 and len(K.models.clone_model(functional).weights) == 4
    with pytest.raises(ValueError, match=r"Sequential model's config.*md\.keras\.Sequential\.from_config"):
        K.Model.from_config(seq.get_config())                         # Keras 3 refuses it too (ValueError)


def test_subclassed_model_config_round_trip():
    sub = Sub(3, name="sub")
    sub(ONE)
    assert sub.get_config() == {"name": "sub", "trainable": True, "dtype": "float32", "units": 3}
    rebuilt = Sub.from_config(sub.get_config())
    assert type(rebuilt) is Sub and rebuilt.units == 3 and rebuilt.name == "sub"
    clone = K.models.clone_model(sub)
    assert type(clone) is Sub and clone.units == 3 and clone(ONE).numpy().shape == (1, 3)

    class NoConfig(K.Model):
        def call(self, x):
            return x
    with pytest.raises(NotImplementedError, match="implement get_config"):
        NoConfig().get_config()

    class Strict(Sub):
        def get_config(self):
            return {**super().get_config(), "extra": 1}
    with pytest.raises(TypeError, match=r"Unable to revive model from config.*Strict"):
        Strict.from_config(Strict().get_config())
