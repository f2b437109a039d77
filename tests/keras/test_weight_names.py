"""A layer's weights carry Keras 3's ``name`` on one device (keras.io's fine-tuning and weight-loading
programs filter weights by it: ``"variance" in w.name``); torch's ``Tensor.name`` was None there."""

from __future__ import annotations

import multidev as md

L = md.keras.layers


def test_weights_are_named_as_keras_3_names_them():
    inputs = L.Input((4, 4, 3))
    x = L.BatchNormalization(name="bn")(L.Conv2D(2, 3, name="c")(inputs))
    model = md.keras.Model(inputs, x)
    assert [w.name for w in model.weights] == ["kernel", "bias", "gamma", "beta", "moving_mean", "moving_variance"]
    assert [w.name for w in model.non_trainable_weights] == ["moving_mean", "moving_variance"]


def test_a_weight_added_without_a_name_gets_keras_3_default():
    class Scale(L.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones")
            self.count = self.add_weight(shape=(), initializer="zeros", trainable=False)

    layer = Scale()
    layer(md.constant([[1.0, 2.0]]))
    assert (layer.w.name, layer.count.name) == ("variable", "variable_1")
