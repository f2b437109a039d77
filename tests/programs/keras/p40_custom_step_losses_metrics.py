"""keras.io/guides/custom_train_step_in_torch, its lower-level forms, with a layer's ``add_loss``:

1. ``train_step`` with the model's own ``loss_fn``, ``loss_tracker = Mean(name="loss")`` and ``mae_metric``
   listed by a ``metrics`` property (Keras 3 has no ``add_metric``: trackers are the way), the loss plus
   ``sum(self.losses)`` (an activity-regularizing layer's ``self.add_loss``), a regularization tracker;
2. ``train_step`` unpacking ``sample_weight`` and ``compute_loss(..., sample_weight=...)``, trained with
   ``fit(sample_weight=...)`` and then with ``fit(class_weight=...)`` (turned into sample weights by Keras);
3. ``test_step`` overridden, used by ``evaluate``.

Shrunk: 8 features, 64 examples, batch 16, 2 epochs; classification targets for the class-weighted fit.
"""

import numpy as np
import torch

SOURCE = "https://keras.io/guides/custom_train_step_in_torch/"


def run(keras, strategy, workdir, scale=1):
    class ActivityRegularization(keras.layers.Layer):
        def call(self, inputs):
            self.add_loss(1e-2 * keras.ops.mean(keras.ops.square(inputs)))
            return inputs

    class CustomModel(keras.Model):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.loss_tracker = keras.metrics.Mean(name="loss")
            self.mae_metric = keras.metrics.MeanAbsoluteError(name="mae")
            self.reg_tracker = keras.metrics.Mean(name="regularization")
            self.loss_fn = keras.losses.MeanSquaredError()

        def train_step(self, data):
            x, y = data
            # Call torch.nn.Module.zero_grad() to clear the leftover gradients for the weights from the previous
            # train step.
            self.zero_grad()
            # Compute loss
            y_pred = self(x, training=True)  # Forward pass
            regularization = sum(self.losses)
            loss = self.loss_fn(y, y_pred) + regularization
            # Call torch.Tensor.backward() on the loss to compute gradients for the weights.
            loss.backward()
            trainable_weights = [v for v in self.trainable_weights]
            gradients = [v.value.grad for v in trainable_weights]
            # Update weights
            with torch.no_grad():
                self.optimizer.apply(gradients, trainable_weights)
            # Compute our own metrics
            self.loss_tracker.update_state(loss)
            self.mae_metric.update_state(y, y_pred)
            self.reg_tracker.update_state(regularization)
            return {"loss": self.loss_tracker.result(), "mae": self.mae_metric.result(),
                    "regularization": self.reg_tracker.result()}

        @property
        def metrics(self):
            # We list our `Metric` objects here so that `reset_states()` can be called automatically at the
            # start of each epoch or at the start of `evaluate()`.
            return [self.loss_tracker, self.mae_metric, self.reg_tracker]

    class WeightedModel(keras.Model):
        def train_step(self, data):
            # Unpack the data. Its structure depends on your model and on what you pass to `fit()`.
            if len(data) == 3:
                x, y, sample_weight = data
            else:
                sample_weight = None
                x, y = data
            self.zero_grad()
            y_pred = self(x, training=True)  # Forward pass
            loss = self.compute_loss(y=y, y_pred=y_pred, sample_weight=sample_weight, training=True)
            loss.backward()
            trainable_weights = [v for v in self.trainable_weights]
            gradients = [v.value.grad for v in trainable_weights]
            with torch.no_grad():
                self.optimizer.apply(gradients, trainable_weights)
            # Update metrics (includes the metric that tracks the loss)
            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
                else:
                    metric.update_state(y, y_pred, sample_weight=sample_weight)
            # Return a dict mapping metric names to current value.
            return {m.name: m.result() for m in self.metrics}

        def test_step(self, data):
            x, y = data
            y_pred = self(x, training=False)
            loss = self.compute_loss(y=y, y_pred=y_pred, training=False)
            for metric in self.metrics:
                if metric.name != "loss":
                    metric.update_state(y, y_pred)
                else:
                    metric.update_state(loss)
            return {m.name: m.result() for m in self.metrics}

    rng = np.random.RandomState(0)
    x = rng.random((64 * scale, 8)).astype("float32")
    y = rng.random((64 * scale, 1)).astype("float32")
    labels = rng.randint(0, 3, (64 * scale, 1))
    sw = rng.random((64 * scale, 1)).astype("float32")
    out = {}

    keras.utils.set_random_seed(0)
    with strategy.scope():
        inputs = keras.Input(shape=(8,))
        hidden = ActivityRegularization()(keras.layers.Dense(8, activation="relu")(inputs))
        model = CustomModel(inputs, keras.layers.Dense(1)(hidden))
        model.compile(optimizer="adam")
    out["own_trackers"] = model.fit(x, y, batch_size=16, epochs=2, verbose=0).history

    keras.utils.set_random_seed(0)
    with strategy.scope():
        inputs = keras.Input(shape=(8,))
        model = WeightedModel(inputs, keras.layers.Dense(1)(keras.layers.Dense(8, activation="relu")(inputs)))
        model.compile(optimizer="adam", loss="mse", metrics=["mae"])
    out["sample_weighted"] = model.fit(x, y, sample_weight=sw, batch_size=16, epochs=2, verbose=0).history
    out["evaluate"] = model.evaluate(x, y, batch_size=16, verbose=0)

    keras.utils.set_random_seed(0)
    with strategy.scope():
        inputs = keras.Input(shape=(8,))
        classifier = WeightedModel(inputs, keras.layers.Dense(3, activation="softmax")(
            keras.layers.Dense(8, activation="relu")(inputs)))
        classifier.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    out["class_weighted"] = classifier.fit(x, labels, class_weight={0: 1.0, 1: 2.0, 2: 0.5}, batch_size=16,
                                           epochs=2, verbose=0).history
    out["class_evaluate"] = classifier.evaluate(x, labels, batch_size=16, verbose=0)
    return {"_model": classifier, **out, "predict": classifier.predict(x[:4], verbose=0)}
