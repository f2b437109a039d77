"""keras.io/guides/custom_train_step_in_torch: ``train_step`` overridden with torch autograd and
``optimizer.apply``, used by ``fit``.

Shrunk: 32 features, 64 examples, 2 epochs. One line added: the step records that it ran, so a loop
that silently runs its own step instead differs from one device.
"""

import numpy as np
import torch

SOURCE = "https://keras.io/guides/custom_train_step_in_torch/"


def run(keras, strategy, workdir, scale=1):
    class CustomModel(keras.Model):
        def train_step(self, data):
            steps_run.append(1)   # instrumentation (not in the guide): was this step used?
            x, y = data
            self.zero_grad()
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred)
            loss.backward()
            trainable_weights = [v for v in self.trainable_weights]
            gradients = [v.value.grad for v in trainable_weights]
            with torch.no_grad():
                self.optimizer.apply(gradients, trainable_weights)
            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
                else:
                    metric.update_state(y, y_pred)
            return {m.name: m.result() for m in self.metrics}

    steps_run = []
    keras.utils.set_random_seed(0)
    with strategy.scope():
        inputs = keras.Input(shape=(32,))
        outputs = keras.layers.Dense(1)(inputs)
        model = CustomModel(inputs, outputs)
        model.compile(optimizer="adam", loss="mse", metrics=["mae"])
    rng = np.random.RandomState(0)
    x = rng.random((64 * scale, 32)).astype("float32")
    y = rng.random((64 * scale, 1)).astype("float32")
    history = model.fit(x, y, batch_size=16, epochs=2, verbose=0)
    return {"_model": model, "history": history.history, "custom_step_used": float(bool(steps_run)), "predict": model.predict(x[:4], verbose=0)}
