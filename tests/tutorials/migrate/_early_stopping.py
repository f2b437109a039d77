"""Guide "Migrate early stopping" (guide/migrate/early_stopping), TF2 halves.

``tf.keras.callbacks.EarlyStopping(monitor='loss', patience=3)`` with ``fit``; the custom callback
``LimitTrainingTime`` setting ``self.model.stop_training``; the custom loop with ``@tf.function`` steps,
Keras metrics (``update_state``/``result``/``reset_states``) and a patience counter. Substitutions (the
same on both sides): tfds MNIST -> ``synthetic_mnist`` as uint8 images through the guide's
``normalize_img``, batches of 128 -> 16, ``epochs=100`` -> 20 and 8, ``Adam(0.005)`` -> ``Adam(0.05)``
in ``fit`` (so the loss stops falling and EarlyStopping fires), ``LimitTrainingTime(30)`` -> ``(-1)``
(stops after the first batch: a time limit is not reproducible), weights set from a fixed pattern,
and on 2 replicas everything built in the strategy's scope.
"""

import time

import numpy as np

from _common import deterministic, history, rnd, scope, synthetic_mnist, tf, weights

(_x, _y), (_xt, _yt) = synthetic_mnist()


def normalize_img(image, label):
    """Normalizes images: `uint8` -> `float32`."""
    return tf.cast(image, tf.float32) / 255., label


def _datasets():
    ds_train = tf.data.Dataset.from_tensor_slices(((_x * 255).astype("uint8"), _y))
    ds_train = ds_train.map(
        normalize_img, num_parallel_calls=tf.data.experimental.AUTOTUNE)
    ds_train = ds_train.batch(16)

    ds_test = tf.data.Dataset.from_tensor_slices(((_xt * 255).astype("uint8"), _yt))
    ds_test = ds_test.map(
        normalize_img, num_parallel_calls=tf.data.experimental.AUTOTUNE)
    ds_test = ds_test.batch(16)
    return ds_train, ds_test


def _compiled(r, lr):
    with scope(r):
        model = tf.keras.models.Sequential([
            tf.keras.layers.Flatten(input_shape=(28, 28)),
            tf.keras.layers.Dense(128, activation='relu'),
            tf.keras.layers.Dense(10)
        ])
        deterministic(model, 0.05)
        model.compile(
            optimizer=tf.keras.optimizers.Adam(lr),
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=[tf.keras.metrics.SparseCategoricalAccuracy()],
        )
    return model


def early_stopping_fit(r):
    ds_train, ds_test = _datasets()
    model = _compiled(r, 0.05)
    callback = tf.keras.callbacks.EarlyStopping(monitor='loss', patience=3)
    history_ = model.fit(
        ds_train,
        epochs=20,
        validation_data=ds_test,
        callbacks=[callback], verbose=0
    )
    return {"epochs": len(history_.history['loss']), "stopped_epoch": callback.stopped_epoch,
            "h": history(history_), "w": weights(model)}


class LimitTrainingTime(tf.keras.callbacks.Callback):
    def __init__(self, max_time_s):
        super().__init__()
        self.max_time_s = max_time_s
        self.start_time = None

    def on_train_begin(self, logs):
        self.start_time = time.time()

    def on_train_batch_end(self, batch, logs):
        now = time.time()
        if now - self.start_time > self.max_time_s:
            self.model.stop_training = True


def limit_training_time(r):
    ds_train, ds_test = _datasets()
    model = _compiled(r, 0.005)
    callback = LimitTrainingTime(-1)
    history_ = model.fit(
        ds_train,
        epochs=20,
        validation_data=ds_test,
        callbacks=[callback], verbose=0
    )
    return {"epochs": len(history_.history['loss']), "h": history(history_), "iterations": int(model.optimizer.iterations.numpy()),
            "w": weights(model)}


def custom_loop_early_stopping(r):
    ds_train, ds_test = _datasets()
    with scope(r):
        model = tf.keras.models.Sequential([
            tf.keras.layers.Flatten(input_shape=(28, 28)),
            tf.keras.layers.Dense(128, activation='relu'),
            tf.keras.layers.Dense(10)
        ])
        deterministic(model, 0.05)
        optimizer = tf.keras.optimizers.Adam(0.005)
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        train_acc_metric = tf.keras.metrics.SparseCategoricalAccuracy()
        train_loss_metric = tf.keras.metrics.SparseCategoricalCrossentropy()
        val_acc_metric = tf.keras.metrics.SparseCategoricalAccuracy()
        val_loss_metric = tf.keras.metrics.SparseCategoricalCrossentropy()

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss_value = loss_fn(y, logits)
        grads = tape.gradient(loss_value, model.trainable_weights)
        optimizer.apply_gradients(zip(grads, model.trainable_weights))
        train_acc_metric.update_state(y, logits)
        train_loss_metric.update_state(y, logits)
        return loss_value

    @tf.function
    def test_step(x, y):
        logits = model(x, training=False)
        val_acc_metric.update_state(y, logits)
        val_loss_metric.update_state(y, logits)

    epochs = 8
    patience = 5
    wait = 0
    best = 0
    seen = []
    for epoch in range(epochs):
        print("\nStart of epoch %d" % (epoch,))
        start_time = time.time()

        for step, (x_batch_train, y_batch_train) in enumerate(ds_train):
            loss_value = train_step(x_batch_train, y_batch_train)
            if step % 200 == 0:
                print("Training loss at step %d: %.4f" % (step, loss_value.numpy()))
                print("Seen so far: %s samples" % ((step + 1) * 128))
        train_acc = train_acc_metric.result()
        train_loss = train_loss_metric.result()
        train_acc_metric.reset_state()
        train_loss_metric.reset_state()
        print("Training acc over epoch: %.4f" % (train_acc.numpy()))

        for x_batch_val, y_batch_val in ds_test:
            test_step(x_batch_val, y_batch_val)
        val_acc = val_acc_metric.result()
        val_loss = val_loss_metric.result()
        val_acc_metric.reset_state()
        val_loss_metric.reset_state()
        print("Validation acc: %.4f" % (float(val_acc),))
        print("Time taken: %.2fs" % (time.time() - start_time))
        seen.append([rnd(train_acc), rnd(train_loss), rnd(val_acc), rnd(val_loss)])

        # The early stopping strategy: stop the training if `val_loss` does not
        # decrease for a certain number of epoches.
        wait += 1
        if val_loss > best:
            best = val_loss
            wait = 0
        if wait >= patience:
            break
    return {"epochs": seen, "w": weights(model)}


def reset_states_spelling(r):
    """The guide's ``metric.reset_states()`` (tf.keras 2's name; Keras 3 has only ``reset_state``)."""
    with scope(r):
        metric = tf.keras.metrics.SparseCategoricalAccuracy()
    metric.update_state(np.array([1, 2]), np.array([[0., 1., 0.], [1., 0., 0.]], "float32"))
    before = rnd(metric.result())
    metric.reset_states()
    return [before, rnd(metric.result())]


SNIPPETS = [early_stopping_fit, limit_training_time, custom_loop_early_stopping, reset_states_spelling]
