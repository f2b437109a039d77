"""keras.io/guides/writing_a_custom_training_loop_in_torch, distributed as a TensorFlow user distributes a
custom loop: model and optimizer in ``strategy.scope()``, ``strategy.run(train_step)`` over
``experimental_distribute_dataset``, the loss summed per example and divided by the global batch.

The optimizer is built lazily by its first ``apply`` (as in the guide). Shrunk: 32 features,
64 examples, batch 16, 2 epochs.
"""

import numpy as np
import torch

import multidev as md

SOURCE = "https://keras.io/guides/writing_a_custom_training_loop_in_torch/"
GLOBAL_BATCH = 16


def get_model(keras):
    inputs = keras.Input(shape=(32,), name="digits")
    x1 = keras.layers.Dense(16, activation="relu")(inputs)
    x2 = keras.layers.Dense(16, activation="relu")(x1)
    outputs = keras.layers.Dense(10, name="predictions")(x2)
    return keras.Model(inputs=inputs, outputs=outputs)


def run(keras, strategy, workdir, scale=1):
    rng = np.random.RandomState(0)
    x = rng.rand(64 * scale, 32).astype("float32")
    y = np.eye(10, dtype="float32")[rng.randint(0, 10, 64 * scale)]
    dataset = md.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = get_model(keras)
        optimizer = keras.optimizers.Adam(learning_rate=1e-3)
        loss_fn = keras.losses.CategoricalCrossentropy(from_logits=True, reduction="sum")

    def train_step(inputs, targets):
        logits = model(inputs)
        loss = loss_fn(targets, logits) / GLOBAL_BATCH
        model.zero_grad()
        loss.backward()
        trainable_weights = [v for v in model.trainable_weights]
        gradients = [v.value.grad for v in trainable_weights]
        with torch.no_grad():
            optimizer.apply(gradients, trainable_weights)
        return loss.detach()

    losses = []
    for _ in range(2):
        for inputs, targets in strategy.experimental_distribute_dataset(dataset):
            per_replica = strategy.run(train_step, args=(inputs, targets))
            losses.append(float(strategy.reduce("SUM", per_replica, axis=None)))
    return {"_model": model, "losses": losses, "logits": model.predict(x[:4], verbose=0)}
