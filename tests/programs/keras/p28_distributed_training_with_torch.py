"""keras.io/guides/distributed_training_with_torch: a Keras 3 convnet trained by a torch DDP loop
(``torch.optim.Adam(model.parameters())``, ``torch.nn.CrossEntropyLoss()``, ``optimizer.zero_grad()``,
``loss.backward()``, ``optimizer.step()``, ``running_loss += loss.item()``), ported to multidev as
docs/ddp_port.md says: ``init_process_group``/``DDP(model)``/``DistributedSampler`` dropped, model and
optimizer built in ``strategy.scope()``, the per-batch body run by ``strategy.run`` over
``experimental_distribute_dataset`` of the guide's ``DataLoader`` (whose batch is now the global batch).

The guide's model is kept layer for layer (Rescaling, Conv2D without bias, ``BatchNormalization(scale=False)``,
ReLU, GlobalAveragePooling2D, Dense, Dropout(0.5)). Shrunk: 12x12 images, 64 examples, global batch 16,
2 epochs, filters 4/8/8, Dense(16).
"""

import numpy as np
import torch

SOURCE = "https://keras.io/guides/distributed_training_with_torch/"
BATCH = 16


def get_model(keras):
    # Make a simple convnet with batch normalization and dropout.
    inputs = keras.Input(shape=(12, 12, 1))
    x = keras.layers.Rescaling(1.0 / 255.0)(inputs)
    x = keras.layers.Conv2D(filters=4, kernel_size=3, padding="same", use_bias=False)(x)
    x = keras.layers.BatchNormalization(scale=False, center=True)(x)
    x = keras.layers.ReLU()(x)
    x = keras.layers.Conv2D(filters=8, kernel_size=6, use_bias=False, strides=2)(x)
    x = keras.layers.BatchNormalization(scale=False, center=True)(x)
    x = keras.layers.ReLU()(x)
    x = keras.layers.Conv2D(filters=8, kernel_size=6, padding="same", strides=2, name="large_k")(x)
    x = keras.layers.BatchNormalization(scale=False, center=True)(x)
    x = keras.layers.ReLU()(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dense(16, activation="relu")(x)
    x = keras.layers.Dropout(0.5)(x)
    outputs = keras.layers.Dense(10)(x)
    return keras.Model(inputs, outputs)


def get_dataset(scale):
    rng = np.random.RandomState(0)
    x_train = rng.randint(0, 256, (64 * scale, 12, 12)).astype("float32")
    y_train = rng.randint(0, 10, 64 * scale)
    x_train = np.expand_dims(x_train, -1)   # Make sure images have shape (12, 12, 1)
    return torch.utils.data.TensorDataset(torch.from_numpy(x_train), torch.from_numpy(y_train))


def run(keras, strategy, workdir, scale=1):
    num_epochs = 2
    dataset = get_dataset(scale)
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=False)
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = get_model(keras)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = torch.nn.CrossEntropyLoss()

    def train_step(inputs, targets):   # the guide's loop body, as each DDP rank runs it
        outputs = model(inputs)
        loss = loss_fn(outputs, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    epoch_losses = []
    for epoch in range(num_epochs):
        running_loss = 0.0
        running_loss_count = 0
        for inputs, targets in strategy.experimental_distribute_dataset(dataloader):
            per_replica = strategy.run(train_step, args=(inputs, targets))
            running_loss += sum(strategy.experimental_local_results(per_replica)) / strategy.num_replicas_in_sync
            running_loss_count += 1
        epoch_losses.append(running_loss / running_loss_count)
    return {"_model": model, "epoch_losses": epoch_losses,
            "logits": model.predict(dataset.tensors[0][:8].numpy(), verbose=0)}
