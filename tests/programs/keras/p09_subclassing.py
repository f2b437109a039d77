"""keras.io/guides/making_new_layers_and_models_via_subclassing: a ``Linear`` layer with ``add_weight``
built lazily, an activity-regularization layer with ``add_loss``, an ``MLPBlock`` subclassed ``Model``.

Shrunk: 16 features, 64 examples, 2 epochs.
"""

import numpy as np

SOURCE = "https://keras.io/guides/making_new_layers_and_models_via_subclassing/"


def run(keras, strategy, workdir, scale=1):
    ops = keras.ops

    class Linear(keras.layers.Layer):
        def __init__(self, units=32):
            super().__init__()
            self.units = units

        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer="random_normal",
                                     trainable=True)
            self.b = self.add_weight(shape=(self.units,), initializer="random_normal", trainable=True)

        def call(self, inputs):
            return ops.matmul(inputs, self.w) + self.b

    class ActivityRegularizationLayer(keras.layers.Layer):
        def __init__(self, rate=1e-2):
            super().__init__()
            self.rate = rate

        def call(self, inputs):
            self.add_loss(self.rate * ops.mean(inputs))
            return inputs

    class MLPBlock(keras.Model):
        def __init__(self):
            super().__init__()
            self.linear_1 = Linear(16)
            self.regularization = ActivityRegularizationLayer(1e-2)
            self.linear_2 = Linear(16)
            self.linear_3 = Linear(1)

        def call(self, inputs):
            x = self.linear_1(inputs)
            x = ops.relu(x)
            x = self.regularization(x)
            x = self.linear_2(x)
            x = ops.relu(x)
            return self.linear_3(x)

    rng = np.random.RandomState(0)
    x = rng.random((64 * scale, 16)).astype("float32")
    y = rng.random((64 * scale, 1)).astype("float32")
    keras.utils.set_random_seed(0)
    with strategy.scope():
        mlp = MLPBlock()
        mlp.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss="mse")
    history = mlp.fit(x, y, batch_size=16, epochs=2, verbose=0)
    return {"_model": mlp, "history": history.history, "predict": mlp.predict(x[:4], verbose=0)}
