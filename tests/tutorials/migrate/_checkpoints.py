"""Guides "Migrate checkpoint saving" (guide/migrate/checkpoint_saver) and "Migrate the fault tolerance
mechanism" (guide/migrate/fault_tolerance), TF2 halves.

``ModelCheckpoint(filepath=log_dir)`` with ``fit``; ``BackupAndRestore`` with a fit interrupted by a
callback's ``RuntimeError`` and a new model's fit resuming; ``tf.train.Checkpoint`` +
``CheckpointManager(max_to_keep=2)`` in a custom loop that calls ``tf.train.load_checkpoint`` each epoch.
Substitutions (the same on both sides): MNIST -> ``synthetic_mnist`` (64/32 images), ``Dense(512)`` ->
``Dense(64)``, ``Dropout(0.2)`` -> ``Dropout(0.0)`` (TF's and torch's random streams differ: the
numbers could not be compared), weights set from a fixed pattern, ``shuffle=False``, epochs 10 -> 3 (the interruption at
epoch 4 -> 1), and the models built in the strategy's scope on 2 replicas.
"""

import tempfile

import numpy as np

from _common import deterministic, history, listing, rnd, scope, strategy, synthetic_mnist, tf, weights

(x_train, y_train), (x_test, y_test) = synthetic_mnist()


def create_model(softmax=True):
    return tf.keras.models.Sequential([
        tf.keras.layers.Flatten(input_shape=(28, 28)),
        tf.keras.layers.Dense(64, activation='relu'),
        tf.keras.layers.Dropout(0.0),
        tf.keras.layers.Dense(10, activation='softmax' if softmax else None)
    ])


def model_checkpoint_dir(r):
    """checkpoint_saver as printed: ``ModelCheckpoint(filepath=log_dir)`` (a directory, no suffix)."""
    with scope(r):
        model = deterministic(create_model(), 0.05)
        model.compile(optimizer='adam',
                      loss='sparse_categorical_crossentropy',
                      metrics=['accuracy'],
                      steps_per_execution=10)

    log_dir = tempfile.mkdtemp()

    model_checkpoint_callback = tf.keras.callbacks.ModelCheckpoint(
        filepath=log_dir)

    h = model.fit(x=x_train, y=y_train, epochs=3, verbose=0, shuffle=False,
                  validation_data=(x_test, y_test),
                  callbacks=[model_checkpoint_callback])
    return {"h": history(h), "w": weights(model)}


def model_checkpoint_keras_file(r):
    """The same with a ``.keras`` file (what Keras 3 asks for), reloaded with ``load_model``."""
    with scope(r):
        model = deterministic(create_model(), 0.05)
        model.compile(optimizer='adam', loss='sparse_categorical_crossentropy', metrics=['accuracy'])
    path = tempfile.mkdtemp() + "/model.keras"
    callback = tf.keras.callbacks.ModelCheckpoint(filepath=path)
    h = model.fit(x=x_train, y=y_train, epochs=3, verbose=0, shuffle=False, validation_data=(x_test, y_test), callbacks=[callback])
    loaded = tf.keras.models.load_model(path)
    return {"h": history(h), "w": weights(model), "loaded_w": weights(loaded),
            "loaded_predict": rnd(loaded.predict(x_test[:2], verbose=0)[:, :3])}


class InterruptingCallback(tf.keras.callbacks.Callback):
    # A callback for artificially interrupting training.
    def on_epoch_end(self, epoch, log=None):
        if epoch == 1:
            raise RuntimeError('Interruption')


def backup_and_restore(r):
    loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    with scope(r):
        model = deterministic(create_model(softmax=False), 0.05)
        model.compile(optimizer='adam', loss=loss, metrics=['accuracy'], steps_per_execution=10)

    log_dir = tempfile.mkdtemp()

    backup_restore_callback = tf.keras.callbacks.BackupAndRestore(
        backup_dir=log_dir
    )
    try:
        model.fit(x=x_train, y=y_train, epochs=3, verbose=0, shuffle=False,
                  validation_data=(x_test, y_test),
                  callbacks=[backup_restore_callback, InterruptingCallback()])
        interrupted = None
    except Exception as e:
        interrupted = f'{type(e).__name__}:{e}'
    first_w = weights(model)
    with scope(r):
        model = create_model(softmax=False)
        model.compile(optimizer='adam', loss=loss, metrics=['accuracy'], steps_per_execution=10)
    h = model.fit(x=x_train, y=y_train, epochs=3, verbose=0, shuffle=False,
                  validation_data=(x_test, y_test),
                  callbacks=[backup_restore_callback])
    return {"interrupted": interrupted, "first_w": first_w, "h": history(h), "w": weights(model),
            "left": listing(log_dir)}


def checkpoint_manager_loop(r):
    with scope(r):
        model = deterministic(create_model(softmax=False), 0.05)
        optimizer = tf.keras.optimizers.SGD(learning_rate=0.001)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    log_dir = tempfile.mkdtemp()
    epochs = 3
    steps_per_epoch = 2

    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
    checkpoint_manager = tf.train.CheckpointManager(
        checkpoint, log_dir, max_to_keep=2)

    losses, shapes = [], []
    for epoch in range(epochs):
        if epoch > 0:
            reader = tf.train.load_checkpoint(save_path)
            shapes.append(sorted(map(list, reader.get_variable_to_shape_map().values())))
        for step in range(steps_per_epoch):
            with tf.GradientTape() as tape:

                logits = model(x_train, training=True)
                loss_value = loss_fn(y_train, logits)

                grads = tape.gradient(loss_value, model.trainable_weights)
                optimizer.apply_gradients(zip(grads, model.trainable_weights))

            save_path = checkpoint_manager.save()
            print(f"Training loss at step {step}: {loss_value}")
            losses.append(rnd(loss_value))
    kept = [p.rsplit("/", 1)[-1] for p in checkpoint_manager.checkpoints]
    restored = create_model(softmax=False)
    status = tf.train.Checkpoint(model=restored).restore(checkpoint_manager.latest_checkpoint)
    status.expect_partial()
    restored(x_test[:1])
    return {"losses": losses, "kept": kept, "latest": checkpoint_manager.latest_checkpoint.rsplit("/", 1)[-1],
            "shapes": [s for s in shapes[-1] if s], "w": weights(model),
            "copies_equal": _copies_equal(model, r), "restored_w": weights(restored)}


def _copies_equal(model, r):
    """Every replica's copy of every weight equal (md's copies are torch tensors: detached to read)."""
    local = (strategy(r) if r > 1 else tf.distribute.get_strategy()).experimental_local_results
    host = [[np.asarray(c.detach() if hasattr(c, "detach") else c) for c in local(v)] for v in model.trainable_variables]
    return all(np.array_equal(c, copies[0]) for copies in host for c in copies)


SNIPPETS = [model_checkpoint_dir, model_checkpoint_keras_file, backup_and_restore, checkpoint_manager_loop]
