"""md.keras names keras.io's guides and examples use (tests/programs/keras p31-p40 run them on 2 replicas):
``get_build_config``/``build_from_config``, ``serialize_keras_object``/``deserialize_keras_object``, registered
activation functions, ``keras.Model.from_config`` of a functional config, a plain loss function's targets at the
predictions' rank, ``ops.image.extract_patches``, ``RandomZoom``, ``RandomTranslation``, numpy functions on a model's
outputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import multidev as md

keras = md.keras


def test_a_layer_built_by_hand_with_an_extra_argument_is_saved_and_loaded(tmp_path):
    class Build(keras.layers.Layer):   # keras.io customizing_saving_and_serialization's LayerWithCustomBuild
        def __init__(self, units=3, **kwargs):
            super().__init__(**kwargs)
            self.units = units

        def call(self, inputs):
            return keras.ops.matmul(inputs, self.w)

        def get_config(self):
            return dict(units=self.units, **super().get_config())

        def build(self, input_shape, layer_init):
            super().build(input_shape)
            self._input_shape = input_shape
            self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer=layer_init)
            self.layer_init = layer_init

        def get_build_config(self):
            return {"layer_init": self.layer_init, "input_shape": self._input_shape}

        def build_from_config(self, config):
            self.build(config["input_shape"], config["layer_init"])

    layer = Build(name="by_hand")
    layer.build(input_shape=(4,), layer_init="random_normal")
    model = keras.Sequential([keras.Input(shape=(4,)), layer])
    model.save(tmp_path / "m.keras")
    with keras.saving.custom_object_scope({"Build": Build}):
        restored = keras.models.load_model(tmp_path / "m.keras")
    assert restored.layers[0].layer_init == "random_normal" and restored.built
    x = torch.rand(2, 4)
    torch.testing.assert_close(restored(x), model(x))


def test_default_build_config_is_the_built_input_shape():
    dense = keras.layers.Dense(2)
    assert dense.get_build_config() is None
    dense(torch.zeros(3, 5))
    assert dense.get_build_config() == {"input_shape": [3, 5]}
    fresh = keras.layers.Dense(2)
    fresh.build_from_config({"input_shape": [None, 5]})
    assert fresh.built and tuple(fresh.kernel.shape) == (5, 2)


def test_serialize_keras_object_round_trips_layers_and_registered_functions():
    @keras.saving.register_keras_serializable(package="kerasio_test", name="square")
    def square(x):
        return x**2

    dense = keras.layers.Dense(3, activation=square, name="sq")
    config = keras.saving.serialize_keras_object(dense)
    assert config["class_name"] == "Dense" and config["config"]["activation"] == "kerasio_test>square"
    clone = keras.saving.deserialize_keras_object(config)
    assert clone.name == "sq" and clone.activation is square
    assert keras.saving.serialize_keras_object(None) is None
    assert keras.saving.deserialize_keras_object("kerasio_test>square") is square
    with pytest.raises(TypeError, match="register_keras_serializable"):
        keras.saving.serialize_keras_object(lambda x: x)


def test_model_from_config_rebuilds_a_functional_model():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    clone = keras.Model.from_config(model.get_config())
    clone.set_weights(model.get_weights())
    x = torch.rand(3, 4)
    torch.testing.assert_close(clone(x), model(x))


def test_a_plain_loss_function_gets_targets_at_the_predictions_rank():
    def contrastive_loss(y_true, y_pred):   # keras.io's siamese network: (batch,) labels, (batch, 1) distances
        return keras.ops.mean((1 - y_true) * keras.ops.square(y_pred)
                              + y_true * keras.ops.square(keras.ops.maximum(1 - y_pred, 0)))

    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")(inputs))
    model.compile(loss=contrastive_loss)
    x = np.array([[0.1, 0.2], [0.3, 0.1], [0.0, 0.5], [0.2, 0.2]], dtype="float32")
    y = np.array([0.0, 1.0, 1.0, 0.0], dtype="float32")
    d = x.sum(axis=1)
    expected = np.mean((1 - y) * d**2 + y * np.maximum(1 - d, 0) ** 2)   # per pair, not a (4, 4) broadcast
    assert model.evaluate(x, y, verbose=0) == pytest.approx(float(expected), rel=1e-6)


def test_extract_patches_flattens_rows_columns_channels():
    images = torch.arange(2 * 4 * 6 * 3, dtype=torch.float32).reshape(2, 4, 6, 3)
    patches = keras.ops.image.extract_patches(images, 2)
    assert tuple(patches.shape) == (2, 2, 3, 12)
    torch.testing.assert_close(patches[1, 1, 2], images[1, 2:4, 4:6, :].reshape(-1))
    same = keras.ops.image.extract_patches(images[0], (3, 3), strides=2, padding="same")   # TF's SAME: 2 x 3
    assert tuple(same.shape) == (2, 3, 27)
    with pytest.raises(ValueError, match="'valid' or 'same'"):
        keras.ops.image.extract_patches(images, 2, padding="full")


def test_random_zoom_zooms_out_for_a_positive_factor_and_is_identity_in_inference():
    image = torch.zeros(1, 9, 9, 1)
    image[0, 4, 4, 0] = 1.0
    zoom = keras.layers.RandomZoom(height_factor=(1.0, 1.0), fill_mode="constant", interpolation="nearest", seed=1)
    assert zoom(image, training=False) is image
    torch.testing.assert_close(keras.layers.RandomZoom((0.0, 0.0), seed=1)(image, training=True), image)
    out = zoom(image, training=True)   # twice as far out: the centre pixel stays, the border becomes fill
    assert out[0, 4, 4, 0] == 1.0 and out[0, 0, :, 0].sum() == 0.0
    with pytest.raises(ValueError, match=r"height_factor=\(-2, 0\)"):
        keras.layers.RandomZoom((-2, 0))


def test_random_translation_shifts_down_and_right_for_positive_factors_as_keras():
    image = torch.zeros(1, 10, 10, 1)
    image[0, 2, 3, 0] = 1.0
    shift = keras.layers.RandomTranslation((0.2, 0.2), (0.3, 0.3), fill_mode="constant", interpolation="nearest",
                                           seed=1)
    assert shift(image, training=False) is image
    out = shift(image, training=True)   # 2 rows down, 3 columns right (Keras 3 moves the pixel to (4, 6) too)
    assert torch.nonzero(out[0, ..., 0]).tolist() == [[4, 6]]
    ramp = torch.arange(25.0).reshape(1, 5, 5, 1)   # 'nearest' fill repeats the edge: Keras 3's numbers
    up_left = keras.layers.RandomTranslation((0.4, 0.4), (-0.2, -0.2), fill_mode="nearest", interpolation="nearest")
    assert up_left(ramp, training=True)[0, :, :, 0].tolist() == [
        [1.0, 2.0, 3.0, 4.0, 4.0], [1.0, 2.0, 3.0, 4.0, 4.0], [1.0, 2.0, 3.0, 4.0, 4.0],
        [6.0, 7.0, 8.0, 9.0, 9.0], [11.0, 12.0, 13.0, 14.0, 14.0]]
    config = shift.get_config()
    assert (config["height_factor"], config["width_factor"], config["fill_mode"]) == ((0.2, 0.2), (0.3, 0.3), "constant")
    with pytest.raises(ValueError, match=r"width_factor=\(0.5, 1.5\)"):
        keras.layers.RandomTranslation(0.1, (0.5, 1.5))


def test_numpy_functions_read_a_models_output_that_requires_grad():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(inputs))
    probs = model(torch.rand(1, 4))
    assert probs.requires_grad
    squeezed = np.squeeze(probs)   # keras.io's actor-critic: np.random.choice(2, p=np.squeeze(action_probs))
    assert isinstance(squeezed, np.ndarray) and squeezed.shape == (2,)
    assert np.random.RandomState(0).choice(2, p=squeezed) in (0, 1)


def test_keras_variable_is_a_tracked_md_variable():
    v = keras.Variable(np.random.RandomState(0).random((3,)), name="my_variable")
    assert isinstance(v, md.Variable) and v.dtype == torch.float32 and v.trainable
    w = keras.Variable("ones", shape=(2,), trainable=False)
    assert torch.equal(w.detach(), torch.ones(2)) and not w.trainable
    with pytest.raises(ValueError, match="`shape` argument should be specified"):
        keras.Variable("zeros")


def test_save_and_load_own_variables_hooks_run_in_save_and_load_model(tmp_path):
    class Offset(keras.layers.Dense):   # keras.io's LayerWithCustomVariable, its load hook doubling the variable
        def __init__(self, units, **kwargs):
            super().__init__(units, **kwargs)
            self.my_variable = keras.Variable(np.ones((units,)), name="my_variable")

        def save_own_variables(self, store):
            super().save_own_variables(store)
            store["variables"] = self.my_variable.numpy()

        def load_own_variables(self, store):
            self.my_variable.assign(2 * store["variables"])
            for i, v in enumerate([self.kernel, self.bias]):
                v.assign(store[f"{i}"])

        def call(self, inputs):
            return super().call(inputs) + self.my_variable

    model = keras.Sequential([keras.Input((4,)), Offset(2, name="offset")])
    store = {}
    model.layers[0].save_own_variables(store)
    assert sorted(store) == ["0", "1", "variables"]   # Dense's default: kernel and bias, as Keras 3's
    model.save(tmp_path / "m.keras")
    with keras.saving.custom_object_scope({"Offset": Offset}):
        restored = keras.models.load_model(tmp_path / "m.keras")
    torch.testing.assert_close(restored.layers[0].my_variable.detach(), torch.full((2,), 2.0))   # the hook ran last
    torch.testing.assert_close(restored.layers[0].kernel.detach(), model.layers[0].kernel.detach())


def test_default_own_variables_round_trip_and_refuse_a_short_store():
    norm = keras.layers.BatchNormalization()
    norm(torch.rand(4, 3), training=True)
    store = {}
    norm.save_own_variables(store)
    assert [store[k].shape for k in sorted(store)] == [(3,)] * 4   # gamma, beta, moving mean, moving variance
    fresh = keras.layers.BatchNormalization()
    fresh(torch.zeros(1, 3))
    fresh.load_own_variables(store)
    torch.testing.assert_close(fresh.moving_mean, norm.moving_mean)
    with pytest.raises(ValueError, match="expected 4 variables, but received 1"):
        fresh.load_own_variables({"0": store["0"]})
