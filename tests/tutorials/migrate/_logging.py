"""Guides "Migrate LoggingTensorHook and StopAtStepHook to Keras callbacks" (guide/migrate/logging_stop_hook)
and "Migrate TensorBoard" (guide/migrate/tensorboard), TF2 halves, plus callbacks driven by hand in a custom
loop (``tf.keras.callbacks.CallbackList`` with ``EarlyStopping`` and a ``LambdaCallback``) and
``tf.summary`` in a custom loop.

Substitutions (the same on both sides): MNIST -> ``synthetic_mnist``, ``Dense(512)`` -> ``Dense(64)``,
``Dropout(0.2)`` -> ``Dropout(0.0)``, epochs 10 -> 2, weights from a fixed pattern, ``shuffle=False``;
what is compared of TensorBoard's logs is which directories hold event files (TF 2.21's venv has no
tensorboard package: tf.summary raises there, so multidev's directories are checked against tf.keras's
documented layout).
"""

import os
import tempfile

import numpy as np

from _common import deterministic, floats, history, listing, rnd, scope, synthetic_mnist, tf, weights

(x_train, y_train), (x_test, y_test) = synthetic_mnist()
features = [[1., 1.5], [2., 2.5], [3., 3.5]]
labels = [[0.3], [0.5], [0.7]]


def _event_dirs(log_dir):
    return sorted({os.path.dirname(f) for f in listing(log_dir) if "tfevents" in f})


def tensorboard_callback_fit(r):
    with scope(r):
        model = tf.keras.models.Sequential([
            tf.keras.layers.Flatten(input_shape=(28, 28)),
            tf.keras.layers.Dense(64, activation='relu'),
            tf.keras.layers.Dropout(0.0),
            tf.keras.layers.Dense(10, activation='softmax')
        ])
        deterministic(model, 0.05)
        model.compile(optimizer='adam', loss='sparse_categorical_crossentropy', metrics=['accuracy'],
                      steps_per_execution=10)
    log_dir = tempfile.mkdtemp()
    tensorboard_callback = tf.keras.callbacks.TensorBoard(
        log_dir=log_dir,
        histogram_freq=1)  # Enable histogram computation with each epoch.
    h = model.fit(x=x_train, y=y_train, epochs=2, validation_data=(x_test, y_test),
                  callbacks=[tensorboard_callback], verbose=0, shuffle=False)
    return {"epochs": len(h.history["loss"]), "event_dirs": _event_dirs(log_dir)}


def summary_in_custom_loop(r):
    log_dir = tempfile.mkdtemp()
    writer = tf.summary.create_file_writer(log_dir)
    with writer.as_default():
        for step in range(3):
            tf.summary.scalar("loss", 1.0 / (step + 1), step=step)
    writer.flush()
    return {"event_dirs": _event_dirs(log_dir)}


class StopAtStepHook(tf.keras.callbacks.Callback):
    def __init__(self, stop_step):
        super().__init__()
        self._stop_step = stop_step

    def on_batch_end(self, batch, logs=None):
        if self.model.optimizer.iterations >= self._stop_step:
            self.model.stop_training = True
            print('\nstop training now')


class LoggingTensorCallback(tf.keras.callbacks.Callback):
    def __init__(self, every_n_iter):
        super().__init__()
        self._every_n_iter = every_n_iter
        self._log_count = every_n_iter
        self.logged = []

    def on_batch_end(self, batch, logs=None):
        if self._log_count > 0:
            self._log_count -= 1
            print("Logging Tensor Callback: dense/kernel:", self.model.layers[0].weights[0])
            print("Logging Tensor Callback loss:", logs["loss"])
            self.logged.append([rnd(self.model.layers[0].weights[0]), round(float(logs["loss"]), 5)])


def stop_and_logging_callbacks(r):
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(1)
    with scope(r):
        model = tf.keras.models.Sequential([tf.keras.layers.Dense(1)])
        model.build((None, 2))
        deterministic(model)
        optimizer = tf.keras.optimizers.Adagrad(learning_rate=0.05)
    model.compile(optimizer, "mse")
    logging = LoggingTensorCallback(every_n_iter=2)
    h = model.fit(dataset, callbacks=[StopAtStepHook(stop_step=2), logging], verbose=0)
    return {"h": history(h), "iterations": int(model.optimizer.iterations.numpy()), "logged": logging.logged,
            "w": weights(model)}


def callback_list_custom_loop(r):
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(1)
    with scope(r):
        model = tf.keras.models.Sequential([tf.keras.layers.Dense(1)])
        model.build((None, 2))
        deterministic(model)
        optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)
    loss_fn = tf.keras.losses.MeanSquaredError()
    epoch_ends = []
    log_callback = tf.keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: epoch_ends.append([epoch, floats(logs)]))
    callbacks = tf.keras.callbacks.CallbackList(
        [tf.keras.callbacks.EarlyStopping(monitor='loss', patience=1), log_callback],
        add_history=True, model=model)
    logs = {}
    callbacks.on_train_begin(logs=logs)
    for epoch in range(8):
        callbacks.on_epoch_begin(epoch, logs=logs)
        total = 0.0
        for step, (x, y) in enumerate(dataset):
            callbacks.on_train_batch_begin(step, logs=logs)
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            total += float(loss)
            logs = {"loss": total / (step + 1)}
            callbacks.on_train_batch_end(step, logs=logs)
        callbacks.on_epoch_end(epoch, logs=logs)
        if getattr(model, 'stop_training', False):   # Keras 3 sets it in fit only
            break
    callbacks.on_train_end(logs=logs)
    return {"epoch_ends": epoch_ends, "history": history(model.history), "w": weights(model),
            "stopped": bool(getattr(model, 'stop_training', False))}


SNIPPETS = [tensorboard_callback_fit, summary_in_custom_loop, stop_and_logging_callbacks, callback_list_custom_loop]
