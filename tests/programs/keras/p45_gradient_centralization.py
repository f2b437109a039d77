"""keras.io/examples/vision/gradient_centralization, with the warmup-cosine schedule of keras.io's vision
examples: the example's ``GCRMSprop`` as printed (an ``RMSprop`` subclass overriding ``get_gradients``, which
Keras 3 never calls: it trains as ``RMSprop``, on TensorFlow too), then the same centralization where Keras 3
applies gradients, an ``Adam`` subclass overriding ``apply(grads, trainable_variables)`` (``fit`` calls it on
every backend), with a ``LearningRateSchedule`` subclass ``WarmUpCosine`` (``ops.where`` on the step, a
``get_config``), the model saved as ``.keras`` and loaded back with ``custom_objects``, its optimizer's
schedule restored from its config and evaluated at the step reached.

Centralizing subtracts a per-column mean, a linear map: each replica's share centralized and then summed is
the sum centralized, so the replicas train as one device. Shrunk: 12x12 RGB images, 96 examples, 3 classes,
Conv2D(8)/Conv2D(8), Dense(16), batch 16, 2 epochs each.
"""

import os

import numpy as np

SOURCE = "https://keras.io/examples/vision/gradient_centralization/"


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops
    RMSprop = keras.optimizers.RMSprop   # noqa: N806 (the example's `from keras.optimizers import RMSprop`)

    class GCRMSprop(RMSprop):
        def get_gradients(self, loss, params):
            # We here just provide a modified get_gradients() function since we are
            # trying to just compute the centralized gradients.
            grads = []
            gradients = super().get_gradients()
            for grad in gradients:
                grad_len = len(grad.shape)
                if grad_len > 1:
                    axis = list(range(grad_len - 1))
                    grad -= ops.mean(grad, axis=axis, keep_dims=True)
                grads.append(grad)
            return grads

    class GCAdam(keras.optimizers.Adam):
        def apply(self, grads, trainable_variables=None):
            centralized = []
            for grad in grads:
                if grad is not None and len(grad.shape) > 1:
                    grad = grad - ops.mean(grad, axis=list(range(len(grad.shape) - 1)), keepdims=True)
                centralized.append(grad)
            return super().apply(centralized, trainable_variables)

    class WarmUpCosine(keras.optimizers.schedules.LearningRateSchedule):
        def __init__(self, learning_rate_base, total_steps, warmup_learning_rate, warmup_steps):
            super().__init__()
            self.learning_rate_base = learning_rate_base
            self.total_steps = total_steps
            self.warmup_learning_rate = warmup_learning_rate
            self.warmup_steps = warmup_steps
            self.pi = np.pi

        def __call__(self, step):
            if self.total_steps < self.warmup_steps:
                raise ValueError("Total_steps must be larger or equal to warmup_steps.")
            cos_annealed_lr = ops.cos(self.pi * (ops.cast(step, "float32") - self.warmup_steps)
                                      / float(self.total_steps - self.warmup_steps))
            learning_rate = 0.5 * self.learning_rate_base * (1 + cos_annealed_lr)
            if self.warmup_steps > 0:
                if self.learning_rate_base < self.warmup_learning_rate:
                    raise ValueError("Learning_rate_base must be larger or equal to warmup_learning_rate.")
                slope = (self.learning_rate_base - self.warmup_learning_rate) / self.warmup_steps
                warmup_rate = slope * ops.cast(step, "float32") + self.warmup_learning_rate
                learning_rate = ops.where(step < self.warmup_steps, warmup_rate, learning_rate)
            return ops.where(step > self.total_steps, 0.0, learning_rate)

        def get_config(self):
            return {"learning_rate_base": self.learning_rate_base, "total_steps": self.total_steps,
                    "warmup_learning_rate": self.warmup_learning_rate, "warmup_steps": self.warmup_steps}

    def make_model():
        return keras.Sequential([
            layers.Input(shape=(12, 12, 3)),
            layers.Conv2D(8, (3, 3), activation="relu"),
            layers.MaxPooling2D(2, 2),
            layers.Conv2D(8, (3, 3), activation="relu"),
            layers.Flatten(),
            layers.Dropout(0.5),
            layers.Dense(16, activation="relu"),
            layers.Dense(3, activation="softmax"),
        ])

    rng = np.random.RandomState(0)
    x = rng.random((96 * scale, 12, 12, 3)).astype("float32")
    y = rng.randint(0, 3, 96 * scale)
    out = {}
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = make_model()
        model.compile(loss="sparse_categorical_crossentropy", optimizer=GCRMSprop(learning_rate=1e-3),
                      metrics=["accuracy"])
    out["gc_rmsprop"] = model.fit(x, y, batch_size=16, epochs=2, verbose=0).history

    keras.utils.set_random_seed(0)
    steps = 2 * len(x) // 16
    schedule = WarmUpCosine(learning_rate_base=0.01, total_steps=steps, warmup_learning_rate=0.0, warmup_steps=4)
    with strategy.scope():
        model = make_model()
        model.compile(loss="sparse_categorical_crossentropy", optimizer=GCAdam(learning_rate=schedule),
                      metrics=["accuracy"])
    out["gc_adam"] = model.fit(x, y, batch_size=16, epochs=2, verbose=0).history
    out["lr_at_end"] = float(model.optimizer.learning_rate)
    path = os.path.join(workdir, "gc.keras")
    model.save(path)
    with strategy.scope():
        loaded = keras.models.load_model(path, custom_objects={"GCAdam": GCAdam, "WarmUpCosine": WarmUpCosine})
    config = loaded.optimizer.get_config()["learning_rate"]
    restored = WarmUpCosine.from_config(config["config"])
    out["optimizer_restored"] = float(type(loaded.optimizer) is GCAdam and loaded.optimizer.iterations == steps)
    out["restored_schedule"] = [float(restored(s)) for s in (0, 2, 4, 8, steps + 1)]
    out["evaluate"] = loaded.evaluate(x, y, batch_size=16, verbose=0)
    return {"_model": loaded, **out, "predict": loaded.predict(x[:4], verbose=0)}
