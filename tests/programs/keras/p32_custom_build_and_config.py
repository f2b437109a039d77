"""keras.io/guides/customizing_saving_and_serialization, its other parts: ``get_build_config``/
``build_from_config`` (a layer whose ``build`` takes an extra argument, built by hand before the model),
``get_config``/``from_config`` with a nested sublayer serialized by ``serialize_keras_object`` and a
function registered by ``register_keras_serializable(package, name)`` as its activation.

Distributed as a TensorFlow user does: models built, trained, saved and reloaded (``load_model`` and
``Model.from_config`` in the scope) under the strategy, then trained on. Shrunk: 10 features, 32
examples, batch 8, 2 epochs.
"""

import os

import numpy as np

SOURCE = "https://keras.io/guides/customizing_saving_and_serialization/"


def run(keras, strategy, workdir, scale=1):
    ops = keras.ops

    @keras.saving.register_keras_serializable(package="my_custom_package")
    class LayerWithCustomBuild(keras.layers.Layer):
        def __init__(self, units=32, **kwargs):
            super().__init__(**kwargs)
            self.units = units

        def call(self, inputs):
            return ops.matmul(inputs, self.w) + self.b

        def get_config(self):
            return dict(units=self.units, **super().get_config())

        def build(self, input_shape, layer_init):
            # Note the overriding of `build()` to add an extra argument.
            # Therefore, we will need to manually call build with `layer_init` argument
            # before the first execution of `call()`.
            super().build(input_shape)
            self._input_shape = input_shape
            self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer=layer_init, trainable=True)
            self.b = self.add_weight(shape=(self.units,), initializer=layer_init, trainable=True)
            self.layer_init = layer_init

        def get_build_config(self):
            build_config = {"layer_init": self.layer_init, "input_shape": self._input_shape}
            return build_config

        def build_from_config(self, config):
            # Calls `build()` with the parameters provided and loaded from `get_build_config()`.
            self.build(config["input_shape"], config["layer_init"])

    @keras.saving.register_keras_serializable(package="my_package", name="custom_fn")
    def custom_fn(x):
        return x**2

    @keras.saving.register_keras_serializable(package="ComplexModels")
    class CustomLayer(keras.layers.Layer):
        def __init__(self, units=32, sublayer=None, **kwargs):
            super().__init__(**kwargs)
            self.units = units
            self.sublayer = sublayer

        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer="random_normal",
                                     trainable=True)
            self.b = self.add_weight(shape=(self.units,), initializer="random_normal", trainable=True)

        def call(self, inputs):
            return self.sublayer(ops.matmul(inputs, self.w) + self.b)

        def get_config(self):
            config = super().get_config()
            config.update({"units": self.units, "sublayer": keras.saving.serialize_keras_object(self.sublayer)})
            return config

        @classmethod
        def from_config(cls, config):
            sublayer_config = config.pop("sublayer")
            sublayer = keras.saving.deserialize_keras_object(sublayer_config)
            return cls(sublayer=sublayer, **config)

    rng = np.random.RandomState(0)
    ref_input = rng.random((32 * scale, 10)).astype("float32")
    ref_output = rng.random((32 * scale, 10)).astype("float32")
    out = {}

    # get_build_config / build_from_config
    keras.utils.set_random_seed(0)
    with strategy.scope():
        custom_layer = LayerWithCustomBuild(units=16)
        custom_layer.build(input_shape=(8,), layer_init="random_normal")
        model = keras.Sequential([keras.Input(shape=(8,)), custom_layer])
        model.compile(loss="mse", optimizer="adam", metrics=["accuracy"])
    out["custom_build_fit"] = model.fit(ref_input[:, :8], rng.random((32 * scale, 16)).astype("float32"),
                                        batch_size=8, epochs=2, verbose=0).history
    path = os.path.join(workdir, "custom_build_model.keras")
    model.save(path)
    with strategy.scope():
        restored_model = keras.models.load_model(path)
    np.testing.assert_equal(restored_model.layers[0].layer_init, "random_normal")
    np.testing.assert_equal(restored_model.built, True)
    out["custom_build_restored"] = restored_model.predict(ref_input[:4, :8], verbose=0)

    # get_config / from_config with a registered function as the sublayer's activation
    keras.utils.set_random_seed(0)
    with strategy.scope():
        layer = CustomLayer(units=4, sublayer=keras.layers.Dense(10, activation=custom_fn))
        inputs = keras.Input((10,))
        model = keras.Model(inputs, layer(inputs))
        model.compile(optimizer="rmsprop", loss="mse")
    out["complex_fit"] = model.fit(ref_input, ref_output, batch_size=8, epochs=2, verbose=0).history
    config = model.get_config()
    with strategy.scope():
        new_model = keras.Model.from_config(config)
        new_model.set_weights(model.get_weights())
        new_model.compile(optimizer="rmsprop", loss="mse")
    out["complex_from_config"] = new_model.predict(ref_input[:4], verbose=0)
    out["complex_from_config_fit"] = new_model.fit(ref_input, ref_output, batch_size=8, epochs=1, verbose=0).history
    return {"_model": new_model, **out}
