"""keras.io/guides/serialization_and_saving: a registered custom layer with ``get_config``, a functional
model trained, saved to ``.keras``, reloaded, and checked to predict the same.

Shrunk: 8 features, 48 examples, 2 epochs.
"""

import os

import numpy as np

SOURCE = "https://keras.io/guides/serialization_and_saving/"


def run(keras, strategy, workdir, scale=1):
    @keras.saving.register_keras_serializable(package="my_package", name="custom_layer")
    class CustomLayer(keras.layers.Layer):
        def __init__(self, factor, **kwargs):
            super().__init__(**kwargs)
            self.factor = factor

        def call(self, x):
            return x * self.factor

        def get_config(self):
            config = super().get_config()
            config.update({"factor": self.factor})
            return config

    rng = np.random.RandomState(0)
    x = rng.random((48 * scale, 8)).astype("float32")
    y = rng.random((48 * scale, 1)).astype("float32")
    keras.utils.set_random_seed(0)
    with strategy.scope():
        inputs = keras.Input(shape=(8,))
        h = keras.layers.Dense(16, activation="relu")(inputs)
        h = CustomLayer(0.5)(h)
        model = keras.Model(inputs, keras.layers.Dense(1)(h))
        model.compile(optimizer="adam", loss="mean_squared_error")
    history = model.fit(x, y, batch_size=16, epochs=2, verbose=0)
    path = os.path.join(workdir, "custom_model.keras")
    model.save(path)
    reconstructed_model = keras.models.load_model(path)
    np.testing.assert_allclose(model.predict(x[:8], verbose=0), reconstructed_model.predict(x[:8], verbose=0),
                               rtol=1e-6, atol=1e-6)
    assert reconstructed_model.layers[2].factor == 0.5
    return {"_model": model, "history": history.history, "predict": reconstructed_model.predict(x[:8], verbose=0)}
