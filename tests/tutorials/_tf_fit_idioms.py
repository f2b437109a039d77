"""Keras ``fit``'s neighbours as users type them (validation_split, class_weight with sample_weight,
initial_epoch, validation_freq, steps_per_epoch over ``.repeat()``, the ``*_on_batch`` methods, predict's
partial batches, a second compile after freezing), written once for ``tf`` = TensorFlow or multidev.
Each program runs on one device and under a MirroredStrategy over 2 logical CPUs (``_tf_more4_programs.py``).
"""

import math

import numpy as np

from _tf_core_common import copies_agree, deterministic, history, raised, rnd, scope, tf


def data(n=24, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(n, 4).astype("float32")
    y = (np.abs(x[:, 0] * 2 + x[:, 1]) % 3).astype("int64")
    return x, y


def classifier(activation=None):
    """4 -> 8 -> 3, weights from a fixed pattern (the same numbers on both sides)."""
    model = tf.keras.Sequential([tf.keras.Input(shape=(4,)), tf.keras.layers.Dense(8, activation="relu"),
                                 tf.keras.layers.Dense(3, activation=activation)])
    return deterministic(model, 0.3)


def fit_neighbours(replicas):
    x, y = data()
    sw = np.linspace(0.5, 1.5, len(x)).astype("float32")
    with scope(replicas):
        model = classifier("softmax")
        model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy",
                      metrics=["acc"], weighted_metrics=["acc"])
    # both weights with validation_split: tf.keras 2 fails (a TensorShape error), md refuses the pair
    out = {"both_weights": raised(lambda: model.fit(x, y, batch_size=8, validation_split=0.25, sample_weight=sw,
                                                     class_weight={0: 1.0, 1: 2.0}, verbose=0))["raises"]}
    # 18 training rows in batches of 8: the last batch (2 rows) is split over the replicas
    h = model.fit(x, y, batch_size=8, epochs=3, validation_split=0.25, shuffle=False, sample_weight=sw,
                  validation_freq=2, verbose=0)
    out.update(first=history(h), first_epochs=h.epoch)
    h = model.fit(x, y, batch_size=6, epochs=1, validation_split=0.25, shuffle=False,
                  class_weight={0: 1.0, 1: 2.0, 2: 0.5}, verbose=0)
    out["class_weighted"] = history(h)
    h = model.fit(x, y, batch_size=8, epochs=5, initial_epoch=3, validation_split=0.25, shuffle=False, verbose=0)
    out["resumed"], out["resumed_epochs"] = history(h), h.epoch
    out["params"] = {k: v for k, v in sorted(h.params.items())}
    ev = model.evaluate(x, y, batch_size=5, sample_weight=sw, return_dict=True, verbose=0)
    out["evaluate"] = {k: round(float(v), 5) for k, v in sorted(ev.items())}
    out["evaluate_list"] = rnd(model.evaluate(x, y, batch_size=7, verbose=0), 5)
    out["metrics_names"] = model.metrics_names
    out["copies_agree"] = copies_agree(model.trainable_variables)
    return out


def shuffled_split(replicas):
    """validation_split with shuffle=True: the split is taken before shuffling, one batch per epoch (a
    shuffle only reorders a sum)."""
    x, y = data(20, 1)
    with scope(replicas):
        model = classifier()
        model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
    h = model.fit(x, y, batch_size=16, epochs=3, validation_split=0.2, shuffle=True, verbose=0)
    return {"history": history(h), "weights": rnd(model.layers[-1].kernel, 4)}


def repeat_steps(replicas):
    """steps_per_epoch over a repeated dataset: the next epoch continues the iterator; validation_steps of a
    finite validation set."""
    x, y = data()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(8).repeat()
    val = tf.data.Dataset.from_tensor_slices((x[:12], y[:12])).batch(5)
    with scope(replicas):
        model = classifier()
        model.compile(optimizer=tf.keras.optimizers.SGD(0.2),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["sparse_categorical_accuracy"])
    h = model.fit(ds, steps_per_epoch=2, epochs=3, validation_data=val, validation_steps=2, verbose=0)
    out = {"history": history(h), "iterations": int(model.optimizer.iterations.numpy())}
    out["evaluate_steps"] = rnd(model.evaluate(ds, steps=4, verbose=0), 5)
    out["predict_steps"] = list(model.predict(ds, steps=2, verbose=0).shape)
    return out


def on_batch(replicas):
    x, y = data()
    yf = tf.keras.utils.to_categorical(y, 3)
    with scope(replicas):
        model = classifier("softmax")
        model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss="categorical_crossentropy",
                      metrics=["mae", tf.keras.metrics.CategoricalAccuracy(name="acc")])
    out = {"train1": {k: round(float(v), 5) for k, v in model.train_on_batch(x[:8], yf[:8], return_dict=True).items()}}
    out["train2"] = rnd(model.train_on_batch(x[8:14], yf[8:14], reset_metrics=False), 5)
    out["test1"] = rnd(model.test_on_batch(x[:6], yf[:6], reset_metrics=False), 5)
    out["test2"] = {k: round(float(v), 5) for k, v in
                    model.test_on_batch(x[6:9], yf[6:9], reset_metrics=False, return_dict=True).items()}
    model.reset_metrics()
    out["after_reset"] = [rnd(m.result(), 5) for m in model.metrics]
    out["predict"] = rnd(model.predict_on_batch(x[:5]), 5)
    out["sample_weighted"] = rnd(model.train_on_batch(x[:6], yf[:6], sample_weight=np.arange(6.0)), 5)
    out["metrics_names"] = model.metrics_names
    out["copies_agree"] = copies_agree(model.trainable_variables)
    return out


def predict_partial(replicas):
    x, _ = data(9)
    with scope(replicas):
        model = classifier("softmax")
    out = {"array": rnd(model.predict(x, batch_size=4, verbose=0), 5)}
    out["dataset"] = rnd(model.predict(tf.data.Dataset.from_tensor_slices(x).batch(4), verbose=0), 5)
    out["one_row"] = rnd(model.predict(x[:1], verbose=0), 5)
    out["call"] = rnd(model(x[:3]), 5)
    return out


def recompile_frozen(replicas):
    x, y = data()
    with scope(replicas):
        base = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu"), tf.keras.layers.Dense(6)],
                                   name="base")
        model = tf.keras.Sequential([tf.keras.Input(shape=(4,)), base, tf.keras.layers.Dense(3)])
        deterministic(model, 0.3)
        model.compile(optimizer=tf.keras.optimizers.Adam(0.05),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    out = {"fit1": history(model.fit(x, y, batch_size=12, epochs=2, shuffle=False, verbose=0))}
    out["fit2"] = history(model.fit(x, y, batch_size=12, epochs=1, shuffle=False, verbose=0))
    frozen = [w.copy() for w in base.get_weights()]
    base.trainable = False
    out["trainable_before_recompile"] = len(model.trainable_weights)
    with scope(replicas):
        model.compile(optimizer=tf.keras.optimizers.SGD(0.1),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    out["fit3"] = history(model.fit(x, y, batch_size=12, epochs=2, shuffle=False, verbose=0))
    out["base_unchanged"] = all(np.array_equal(a, b) for a, b in zip(frozen, base.get_weights()))
    out["trainable"] = [len(model.trainable_weights), len(model.non_trainable_weights)]
    out["head"] = rnd(model.layers[-1].kernel, 4)
    out["iterations"] = int(model.optimizer.iterations.numpy())
    out["copies_agree"] = copies_agree(model.variables)
    return out


class _Batches(tf.keras.utils.Sequence):
    """A Sequence that reorders its rows at each epoch's end (Keras calls ``on_epoch_end``)."""

    def __init__(self, x, y, batch_size):
        super().__init__()
        self.x, self.y, self.batch_size, self.order, self.epochs_ended = x, y, batch_size, np.arange(len(x)), 0

    def __len__(self):
        return math.ceil(len(self.x) / self.batch_size)

    def __getitem__(self, i):
        rows = self.order[i * self.batch_size:(i + 1) * self.batch_size]
        return self.x[rows], self.y[rows]

    def on_epoch_end(self):
        self.epochs_ended += 1
        self.order = np.roll(self.order, 5)


def sequences(replicas):
    """fit/evaluate/predict on Sequences with tf.keras 2's loading arguments (with workers > 1 tf.keras 2's
    enqueuer thread calls ``on_epoch_end`` too, as often as its timing gives: 6 or 10 times in 3 epochs)."""
    x, y = data()
    with scope(replicas):
        model = classifier()
        model.compile(optimizer=tf.keras.optimizers.SGD(0.2),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    train, val = _Batches(x, y, 8), _Batches(x[:10], y[:10], 5)
    h = model.fit(train, epochs=3, validation_data=val, shuffle=False, verbose=0, workers=1,
                  use_multiprocessing=False, max_queue_size=4)
    return {"history": history(h), "epochs_ended": [train.epochs_ended, val.epochs_ended],
            "evaluate": rnd(model.evaluate(val, verbose=0, workers=1), 5),
            "predict": list(model.predict(train, verbose=0, max_queue_size=2).shape)}


REPLICATED = [fit_neighbours, shuffled_split, repeat_steps, on_batch, predict_partial, recompile_frozen, sequences]
PROGRAMS = []
