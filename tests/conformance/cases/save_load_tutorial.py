"""TensorFlow's "Save and load models" tutorial (Keras 3 edition) under a two-replica MirroredStrategy:
``ModelCheckpoint('training_2/cp-{epoch:04d}.weights.h5', save_weights_only=True, save_freq=k*n_batches)``,
the newest file found by its epoch number (``tf.train.latest_checkpoint`` reads TensorFlow checkpoints
only: ``None`` here, and ``load_weights(None)`` fails), a best-only callback, and a whole ``.keras`` model
saved after two epochs and trained on with ``initial_epoch``: the uninterrupted fit's weights."""

import math
import os
import re

from conformance_support import LOOP_X, LOOP_Y, InTempDirectory, loop_model, raises, two_cpus, val, weights

BATCH = 2


def _data():
    import numpy as np
    return np.array(LOOP_X, dtype="float32"), np.array(LOOP_Y, dtype="int64")


def _create_model(tf):
    with two_cpus(tf).scope():
        model = loop_model(tf)
        model.compile(optimizer=tf.keras.optimizers.SGD(learning_rate=0.2, momentum=0.9),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["sparse_categorical_accuracy"])
    return model


def _fit(model, epochs, **kwargs):
    x, y = _data()
    return model.fit(x, y, epochs=epochs, batch_size=BATCH, shuffle=False, verbose=0, **kwargs)


def case_checkpoint_every_k_epochs_and_latest(tf):
    with InTempDirectory():
        checkpoint_path = "training_2/cp-{epoch:04d}.weights.h5"
        checkpoint_dir = os.path.dirname(checkpoint_path)
        n_batches = math.ceil(len(LOOP_X) / BATCH)
        cp_callback = tf.keras.callbacks.ModelCheckpoint(filepath=checkpoint_path, verbose=0,
                                                         save_weights_only=True, save_freq=2 * n_batches)
        model = _create_model(tf)
        os.makedirs(checkpoint_dir)
        model.save_weights(checkpoint_path.format(epoch=0))
        _fit(model, 5, callbacks=[cp_callback])
        files = sorted(os.listdir(checkpoint_dir))
        latest_tf = tf.train.latest_checkpoint(checkpoint_dir)
        latest = max(os.listdir(checkpoint_dir), key=lambda f: int(re.search(r'\d+', f).group()))
        model = _create_model(tf)
        model.load_weights(os.path.join(checkpoint_dir, latest))
        x, y = _data()
        evaluated = [round(float(v), 4) for v in model.evaluate(x, y, batch_size=BATCH, verbose=0)]
        return [files, latest_tf, raises(model.load_weights, latest_tf), latest, weights(model), evaluated]


def case_best_only_weights(tf):
    with InTempDirectory():
        callback = tf.keras.callbacks.ModelCheckpoint("best.weights.h5", save_weights_only=True, monitor="loss",
                                                      save_best_only=True, mode="min")
        history = _fit(_create_model(tf), 3, callbacks=[callback])
        model = _create_model(tf)
        model.load_weights("best.weights.h5")
        return [[round(float(v), 4) for v in history.history["loss"]], weights(model)]


def case_keras_file_resumed_with_initial_epoch(tf):
    """Two epochs, ``model.save('m.keras')``, a new program loads it in the scope and fits epochs 3-5: the
    optimizer's momentum and iteration count come back with it, so the weights are the 5-epoch fit's."""
    with InTempDirectory():
        full = _create_model(tf)
        _fit(full, 5)
        model = _create_model(tf)
        _fit(model, 2)
        model.save("m.keras")
        with two_cpus(tf).scope():
            restored = tf.keras.models.load_model("m.keras")
        history = _fit(restored, 5, initial_epoch=2)
        return {"same_as_uninterrupted": max(abs(a - b) for a, b in zip(_flat(weights(restored)),
                                                                         _flat(weights(full)))) < 1e-5,
                "epochs": history.epoch, "iterations": int(val(restored.optimizer.iterations.numpy())),
                "weights": weights(restored)}


def _flat(x):
    return [z for y in x for z in _flat(y)] if isinstance(x, list) else [x]
