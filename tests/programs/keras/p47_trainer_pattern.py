"""keras.io/examples/keras_recipes/trainer_pattern, typed with ``tf.GradientTape`` -> ``md.GradientTape``: a
``MyTrainer(keras.Model)`` wrapping a model, with its own ``loss_fn`` and ``accuracy_metric`` listed by a
``metrics`` property, a ``train_step`` (tape, ``optimizer.apply_gradients``, every metric updated) and a
``test_step``, ``call`` forwarding to the wrapped model; two trainers over two models, compiled with only an
optimizer (``SGD()``), fit with ``validation_data`` and the example's ``EarlyStopping``-free callbacks list
empty; the wrapped model then predicts on its own.

Keras 3 (torch backend) runs it on no device: ``md.GradientTape`` sees torch tensors but Keras 3's
``trainable_variables`` are Keras variables (the example needs Keras 3's TensorFlow backend, ``tf.GradientTape``).
Shrunk: 8x8 images, 256 training and 64 test examples, Dense(32), batch 32, 2 epochs.
"""

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/keras_recipes/trainer_pattern/"


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers

    class MyTrainer(keras.Model):
        def __init__(self, model):
            super().__init__()
            self.model = model
            # Create loss and metrics here.
            self.loss_fn = keras.losses.SparseCategoricalCrossentropy()
            self.accuracy_metric = keras.metrics.SparseCategoricalAccuracy()

        @property
        def metrics(self):
            # List metrics here.
            return [self.accuracy_metric]

        def train_step(self, data):
            x, y = data
            with md.GradientTape() as tape:
                y_pred = self.model(x, training=True)  # Forward pass
                # Compute loss value
                loss = self.loss_fn(y, y_pred)
            # Compute gradients
            trainable_vars = self.trainable_variables
            gradients = tape.gradient(loss, trainable_vars)
            # Update weights
            self.optimizer.apply_gradients(zip(gradients, trainable_vars))
            # Update metrics
            for metric in self.metrics:
                metric.update_state(y, y_pred)
            # Return a dict mapping metric names to current value.
            return {m.name: m.result() for m in self.metrics}

        def test_step(self, data):
            x, y = data
            # Inference step
            y_pred = self.model(x, training=False)
            # Update metrics
            for metric in self.metrics:
                metric.update_state(y, y_pred)
            return {m.name: m.result() for m in self.metrics}

        def call(self, x):
            # Equivalent to `call()` of the wrapped keras.Model
            x = self.model(x)
            return x

    rng = np.random.RandomState(0)
    x_train = rng.random((256 * scale, 8, 8)).astype("float32")
    y_train = (x_train.reshape(len(x_train), -1)[:, :10].argmax(axis=1)).astype("int64")
    x_test = rng.random((64, 8, 8)).astype("float32")
    y_test = (x_test.reshape(64, -1)[:, :10].argmax(axis=1)).astype("int64")
    out = {}
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model_a = keras.models.Sequential([
            layers.Input(shape=(8, 8)),
            layers.Flatten(),
            layers.Dense(32, activation="relu"),
            layers.Dropout(0.2),
            layers.Dense(10, activation="softmax"),
        ])
        model_b = keras.models.Sequential([
            layers.Input(shape=(8, 8)),
            layers.Flatten(),
            layers.Dense(16, activation="relu"),
            layers.Dense(10, activation="softmax"),
        ])
        trainer_1 = MyTrainer(model_a)
        trainer_2 = MyTrainer(model_b)
        trainer_1.compile(optimizer=keras.optimizers.SGD(learning_rate=0.5))
        trainer_2.compile(optimizer=keras.optimizers.Adam(0.01))
    initial = model_a.get_weights()
    out["trainer_1"] = trainer_1.fit(x_train, y_train, epochs=2, batch_size=32,
                                     validation_data=(x_test, y_test), verbose=0).history
    out["trainer_2"] = trainer_2.fit(x_train, y_train, epochs=2, batch_size=32,
                                     validation_data=(x_test, y_test), verbose=0).history
    out["moved"] = max(float(np.abs(a - b).max()) for a, b in zip(model_a.get_weights(), initial))   # it trained
    out["evaluate"] = trainer_2.evaluate(x_test, y_test, batch_size=32, verbose=0)
    out["predict_a"] = model_a.predict(x_test[:4], verbose=0)
    return {"_model": model_b, **out, "predict_b": model_b.predict(x_test[:4], verbose=0)}
