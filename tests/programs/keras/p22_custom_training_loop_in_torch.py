"""keras.io/guides/writing_a_custom_training_loop_in_torch, its two loops as a TensorFlow user distributes
them (model, optimizers, metrics in ``strategy.scope()``; ``strategy.run(step)`` over
``experimental_distribute_dataset`` of the guide's torch ``DataLoader``):

1. the torch-native loop: ``torch.optim.Adam(model.parameters())``, ``torch.nn.CrossEntropyLoss()`` (a mean
   over the replica's examples, as DDP takes it), ``model.zero_grad()``, ``loss.backward()``, ``optimizer.step()``;
2. the Keras loop with metrics: ``keras.optimizers.Adam``, ``CategoricalCrossentropy(from_logits=True)``,
   ``v.value.grad`` handed to ``optimizer.apply`` under ``torch.no_grad()``, a training ``CategoricalAccuracy``
   updated in the step, read with ``result()`` and ``reset_state()`` per epoch, a validation loop calling
   ``model(x, training=False)`` outside ``strategy.run`` (as the guide does, in cross-replica context), and
   the ``ActivityRegularizationLayer`` whose ``self.add_loss(1e-2 * torch.sum(inputs))`` the loop adds
   through ``model.losses`` (the guide builds that model, then trains ``get_model()`` by mistake: here the
   model with the layer is trained).

Unchanged but for the scope and ``strategy.run``: Keras 3 on TensorFlow's strategies divides a mean loss
called in ``strategy.run`` by the replica count itself (its optimizer sums the replicas' gradients), and
the activity loss, a sum over the replica's own rows, adds up over the replicas to the global batch's.
Shrunk: 32 features (not MNIST's 784), 64 training and 32 validation examples, batch 16, 2 epochs, Dense(16)
layers; the training DataLoader's shuffle seeded.
"""

import numpy as np
import torch

SOURCE = "https://keras.io/guides/writing_a_custom_training_loop_in_torch/"
BATCH = 16


def _data(scale):
    rng = np.random.RandomState(0)
    x = rng.rand(96 * scale, 32).astype("float32")
    y = np.eye(10, dtype="float32")[rng.randint(0, 10, 96 * scale)]
    train = torch.utils.data.TensorDataset(torch.from_numpy(x[:-32]), torch.from_numpy(y[:-32]))
    val = torch.utils.data.TensorDataset(torch.from_numpy(x[-32:]), torch.from_numpy(y[-32:]))
    train_dataloader = torch.utils.data.DataLoader(train, batch_size=BATCH, shuffle=True,
                                                   generator=torch.Generator().manual_seed(0))
    val_dataloader = torch.utils.data.DataLoader(val, batch_size=BATCH, shuffle=False)
    return x, train_dataloader, val_dataloader


def run(keras, strategy, workdir, scale=1):
    def get_model(regularized=False):
        inputs = keras.Input(shape=(32,), name="digits")
        x = keras.layers.Dense(16, activation="relu")(inputs)
        if regularized:
            x = ActivityRegularizationLayer()(x)
        x = keras.layers.Dense(16, activation="relu")(x)
        outputs = keras.layers.Dense(10, name="predictions")(x)
        return keras.Model(inputs=inputs, outputs=outputs)

    class ActivityRegularizationLayer(keras.layers.Layer):
        def call(self, inputs):
            self.add_loss(1e-2 * torch.sum(inputs))
            return inputs

    x, train_dataloader, val_dataloader = _data(scale)
    distributed = strategy.experimental_distribute_dataset(train_dataloader)
    out = {}

    # 1. torch optimizer, torch loss
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = get_model()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = torch.nn.CrossEntropyLoss()

    def torch_step(inputs, targets):
        logits = model(inputs)
        loss = loss_fn(logits, targets)
        model.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach()

    out["torch_losses"] = [float(strategy.reduce("MEAN", strategy.run(torch_step, args=batch), axis=None))
                           for _ in range(2) for batch in distributed]
    out["torch_logits"] = model.predict(x[:4], verbose=0)

    # 2. Keras optimizer, Keras loss, metrics in the loop, the model's own losses
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = get_model(regularized=True)
        optimizer = keras.optimizers.Adam(learning_rate=1e-3)
        loss_fn = keras.losses.CategoricalCrossentropy(from_logits=True)
        train_acc_metric = keras.metrics.CategoricalAccuracy()
        val_acc_metric = keras.metrics.CategoricalAccuracy()

    def keras_step(inputs, targets):
        logits = model(inputs)
        loss = loss_fn(targets, logits)
        if model.losses:
            loss = loss + torch.sum(*model.losses)
        model.zero_grad()
        trainable_weights = [v for v in model.trainable_weights]
        loss.backward()
        gradients = [v.value.grad for v in trainable_weights]
        with torch.no_grad():
            optimizer.apply(gradients, trainable_weights)
        train_acc_metric.update_state(targets, logits)
        return loss.detach()

    out.update(keras_losses=[], train_acc=[], val_acc=[])
    for _ in range(2):
        for batch in distributed:
            out["keras_losses"].append(float(strategy.reduce("SUM", strategy.run(keras_step, args=batch), axis=None)))
        out["train_acc"].append(float(train_acc_metric.result()))
        train_acc_metric.reset_state()
        for x_batch_val, y_batch_val in val_dataloader:
            val_logits = model(x_batch_val, training=False)
            val_acc_metric.update_state(y_batch_val, val_logits)
        out["val_acc"].append(float(val_acc_metric.result()))
        val_acc_metric.reset_state()
    out["keras_logits"] = model.predict(x[:4], verbose=0)
    out["_model"] = model
    return out
