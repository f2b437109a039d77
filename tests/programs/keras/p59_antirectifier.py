"""keras.io/examples/keras_recipes/antirectifier as printed: an ``Antirectifier`` layer with its own ``build``
(``add_weight`` of a ``(2 * dim, dim)`` kernel from ``keras.initializers.get("he_normal")``), a ``call`` that
subtracts the mean in place (``inputs -= ops.mean(...)``: in place on the previous Dense's output, which torch
allows) and concatenates the positive and negative parts, and a ``get_config`` serialising its initializer;
``RMSprop``, ``validation_split``, ``Dropout(0.5)``, ``evaluate``; then the model saved as ``.keras`` and loaded
with ``custom_objects`` (the config round trip), its predictions compared.

Shrunk: 64 features (784), Dense 32 (256), 192 training and 32 test examples, batch 32, 2 epochs.
"""

import os

import numpy as np

SOURCE = "https://keras.io/examples/keras_recipes/antirectifier/"


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops

    class Antirectifier(layers.Layer):
        def __init__(self, initializer="he_normal", **kwargs):
            super().__init__(**kwargs)
            self.initializer = keras.initializers.get(initializer)

        def build(self, input_shape):
            output_dim = input_shape[-1]
            self.kernel = self.add_weight(shape=(output_dim * 2, output_dim), initializer=self.initializer,
                                          name="kernel", trainable=True)

        def call(self, inputs):
            inputs -= ops.mean(inputs, axis=-1, keepdims=True)
            pos = ops.relu(inputs)
            neg = ops.relu(-inputs)
            concatenated = ops.concatenate([pos, neg], axis=-1)
            mixed = ops.matmul(concatenated, self.kernel)
            return mixed

        def get_config(self):
            base_config = super().get_config()
            config = {"initializer": keras.initializers.serialize(self.initializer)}
            return dict(list(base_config.items()) + list(config.items()))

    rng = np.random.RandomState(0)
    x = rng.rand(224 * scale, 64).astype("float32")
    y = (x[:, :8].sum(axis=1) * 2.5).astype("int64") % 10
    x_train, y_train, x_test, y_test = x[:192 * scale], y[:192 * scale], x[192 * scale:], y[192 * scale:]
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = keras.Sequential([
            keras.Input(shape=(64,)),
            layers.Dense(32),
            Antirectifier(),
            layers.Dense(32),
            Antirectifier(),
            layers.Dropout(0.5),
            layers.Dense(10),
        ])
        model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      optimizer=keras.optimizers.RMSprop(), metrics=[keras.metrics.SparseCategoricalAccuracy()])
    history = model.fit(x_train, y_train, batch_size=32, epochs=2, validation_split=0.15, verbose=0)
    evaluation = model.evaluate(x_test, y_test, verbose=0)
    path = os.path.join(workdir, "antirectifier.keras")
    model.save(path)
    with strategy.scope():
        restored = keras.models.load_model(path, custom_objects={"Antirectifier": Antirectifier})
    predict = model.predict(x_test, verbose=0)
    return {"_model": model, "history": history.history, "evaluate": evaluation, "predict": predict,
            "restored_gap": float(np.abs(restored.predict(x_test, verbose=0) - predict).max()),
            "initializer": restored.layers[1].get_config()["initializer"]["class_name"] == "HeNormal"}
