"""keras.io/guides/distributed_training_with_tensorflow, typed with ``tf.`` -> ``md.``: a compiled MLP built
in ``MirroredStrategy.scope()``, ``fit`` on batched ``md.data`` datasets with ``validation_data``,
``ModelCheckpoint(filepath=checkpoint_dir + "/ckpt-{epoch}.keras", save_freq="epoch")``, ``evaluate`` on
the test set, then the guide's fault-tolerance part: ``make_or_restore_model()`` loads the newest
checkpoint (by ``os.path.getctime``) inside the scope and training goes on from it.

Instrumented: the restored model's predictions, and one more epoch from the restored model. Shrunk: 32
features (not MNIST's 784), 96 training, 32 validation and 32 test examples, batch 16, Dense(16) layers,
2 epochs.
"""

import os

import numpy as np

import multidev as md

SOURCE = "https://keras.io/guides/distributed_training_with_tensorflow/"


def get_compiled_model(keras):
    # Make a simple 2-layer densely-connected neural network.
    inputs = keras.Input(shape=(32,))
    x = keras.layers.Dense(16, activation="relu")(inputs)
    x = keras.layers.Dense(16, activation="relu")(x)
    outputs = keras.layers.Dense(10)(x)
    model = keras.Model(inputs, outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy()],
    )
    return model


def get_dataset(scale):
    batch_size = 16
    num_val_samples = 32
    rng = np.random.RandomState(0)
    x_train = rng.randint(0, 256, (128 * scale, 32)).astype("float32") / 255
    y_train = rng.randint(0, 10, 128 * scale).astype("float32")
    x_test = rng.randint(0, 256, (32, 32)).astype("float32") / 255
    y_test = rng.randint(0, 10, 32).astype("float32")
    # Reserve num_val_samples samples for validation
    x_val = x_train[-num_val_samples:]
    y_val = y_train[-num_val_samples:]
    x_train = x_train[:-num_val_samples]
    y_train = y_train[:-num_val_samples]
    return (
        md.data.Dataset.from_tensor_slices((x_train, y_train)).batch(batch_size),
        md.data.Dataset.from_tensor_slices((x_val, y_val)).batch(batch_size),
        md.data.Dataset.from_tensor_slices((x_test, y_test)).batch(batch_size),
    )


def run(keras, strategy, workdir, scale=1):
    checkpoint_dir = os.path.join(workdir, "ckpt")
    if not os.path.exists(checkpoint_dir):
        os.makedirs(checkpoint_dir)

    def make_or_restore_model():
        # Either restore the latest model, or create a fresh one if there is no checkpoint available.
        checkpoints = [checkpoint_dir + "/" + name for name in os.listdir(checkpoint_dir)]
        if checkpoints:
            latest_checkpoint = max(checkpoints, key=os.path.getctime)
            print("Restoring from", latest_checkpoint)
            return keras.models.load_model(latest_checkpoint)
        print("Creating a new model")
        return get_compiled_model(keras)

    def run_training(epochs=1):
        # Open a strategy scope and create/restore the model
        with strategy.scope():
            model = make_or_restore_model()
        callbacks = [
            # This callback saves a SavedModel every epoch
            # We include the current epoch in the folder name.
            keras.callbacks.ModelCheckpoint(filepath=checkpoint_dir + "/ckpt-{epoch}.keras", save_freq="epoch")
        ]
        history = model.fit(train_dataset, epochs=epochs, callbacks=callbacks, validation_data=val_dataset,
                            verbose=0)
        return model, history.history

    print("Number of devices: {}".format(strategy.num_replicas_in_sync))
    train_dataset, val_dataset, test_dataset = get_dataset(scale)
    keras.utils.set_random_seed(0)
    model, first = run_training(epochs=2)
    test_results = model.evaluate(test_dataset, verbose=0)
    saved = sorted(os.listdir(checkpoint_dir))
    assert saved == ["ckpt-1.keras", "ckpt-2.keras"], saved
    os.utime(os.path.join(checkpoint_dir, "ckpt-2.keras"))   # the newest by ctime even on coarse clocks
    x_test = np.stack([x for x, _ in test_dataset.unbatch()])
    before = model.predict(x_test[:8], verbose=0)
    restored, resumed = run_training(epochs=1)   # the guide's "run_training()" again: it restores ckpt-2
    return {"_model": restored, "first": first, "test": test_results, "saved_predict": before,
            "resumed": resumed, "resumed_predict": restored.predict(x_test[:8], verbose=0)}
