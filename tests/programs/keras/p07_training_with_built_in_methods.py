"""keras.io/guides/training_with_built_in_methods: a custom loss (keras.ops), a custom metric subclass
(``add_variable``/``assign_add``), class weights and ``validation_data``.

Shrunk: 64-dim inputs, 96 examples, 2 epochs.
"""

import numpy as np

SOURCE = "https://keras.io/guides/training_with_built_in_methods/"


def get_uncompiled_model(keras):
    layers = keras.layers
    inputs = keras.Input(shape=(64,), name="digits")
    x = layers.Dense(16, activation="relu", name="dense_1")(inputs)
    x = layers.Dense(16, activation="relu", name="dense_2")(x)
    outputs = layers.Dense(10, activation="softmax", name="predictions")(x)
    return keras.Model(inputs=inputs, outputs=outputs)


def run(keras, strategy, workdir, scale=1):
    ops = keras.ops

    def custom_mean_squared_error(y_true, y_pred):
        return ops.mean(ops.square(y_true - y_pred), axis=-1)

    class CategoricalTruePositives(keras.metrics.Metric):
        def __init__(self, name="categorical_true_positives", **kwargs):
            super().__init__(name=name, **kwargs)
            self.true_positives = self.add_variable(shape=(), name="ctp", initializer="zeros")

        def update_state(self, y_true, y_pred, sample_weight=None):
            y_pred = ops.reshape(ops.argmax(y_pred, axis=1), (-1, 1))
            values = ops.cast(y_true, "int32") == ops.cast(y_pred, "int32")
            values = ops.cast(values, "float32")
            if sample_weight is not None:
                sample_weight = ops.cast(sample_weight, "float32")
                values = ops.multiply(values, sample_weight)
            self.true_positives.assign_add(ops.sum(values))

        def result(self):
            return self.true_positives.value

        def reset_state(self):
            self.true_positives.assign(0.0)

    rng = np.random.RandomState(0)
    n = 96 * scale
    x_train = rng.rand(n, 64).astype("float32")
    y_train = rng.randint(0, 10, (n, 1))
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = get_uncompiled_model(keras)
        model.compile(optimizer=keras.optimizers.RMSprop(learning_rate=1e-3),
                      loss=keras.losses.SparseCategoricalCrossentropy(), metrics=[CategoricalTruePositives()])
    class_weight = {i: 1.0 + (i == 5) for i in range(10)}
    history = model.fit(x_train, y_train, batch_size=16, epochs=2, class_weight=class_weight,
                        validation_data=(x_train[:32], y_train[:32]), verbose=0)
    with strategy.scope():
        regression = get_uncompiled_model(keras)
        regression.compile(optimizer=keras.optimizers.Adam(), loss=custom_mean_squared_error)
    y_train_one_hot = ops.one_hot(ops.convert_to_tensor(y_train[:, 0]), num_classes=10)
    second = regression.fit(x_train, y_train_one_hot, batch_size=16, epochs=1, verbose=0)
    return {"_model": model, "history": history.history, "custom_loss": second.history["loss"]}
