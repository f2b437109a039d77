"""Keras callbacks as users type them (ReduceLROnPlateau, LearningRateScheduler printing, CSVLogger,
TerminateOnNaN, ModelCheckpoint's best weights at relative paths, History) and losses and metrics by name
and option, written once for ``tf`` = TensorFlow or multidev (``_tf_more4_programs.py``)."""

import contextlib
import csv
import io
import os

import numpy as np

from _tf_core_common import copies_agree, deterministic, history, raised, rnd, scope, tf
from _tf_fit_idioms import classifier, data


def _csv_columns(path):
    with open(path) as f:
        rows = list(csv.reader(f))
    return {name: [round(float(row[i]), 5) for row in rows[1:]] for i, name in enumerate(rows[0])}


def callbacks(replicas):
    x, y = data()
    with scope(replicas):
        model = classifier()
        model.compile(optimizer=tf.keras.optimizers.SGD(0.2),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    cbs = [tf.keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=1, min_delta=10.0,
                                                min_lr=0.03),
           tf.keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr if epoch < 2 else lr * 0.9, verbose=1),
           tf.keras.callbacks.CSVLogger("training.log", separator=",", append=False),
           tf.keras.callbacks.ModelCheckpoint("ckpt/best.weights.h5", monitor="val_loss", save_best_only=True,
                                              save_weights_only=True),
           tf.keras.callbacks.TerminateOnNaN()]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        h = model.fit(x, y, batch_size=8, epochs=5, validation_data=(x[:8], y[:8]), shuffle=False, verbose=0,
                      callbacks=cbs)
    out = {"history": history(h), "epochs": h.epoch, "printed": printed.getvalue().strip().splitlines()}
    out["lr"] = round(float(model.optimizer.learning_rate.numpy()), 6)
    out["csv"] = _csv_columns("training.log")
    out["checkpoints"] = sorted(os.listdir("ckpt"))
    out["best_epoch"] = min(range(5), key=lambda i: h.history["val_loss"][i])
    out["copies_agree"] = copies_agree(model.trainable_variables)
    # read back on one device (tf.keras 2 fails loading an .h5 into a model made in a MirroredStrategy's scope)
    plain = classifier()
    plain.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    plain.load_weights("ckpt/best.weights.h5")
    out["restored_is_last"] = rnd(plain.layers[-1].kernel, 4) == rnd(model.layers[-1].kernel, 4)
    out["restored_val_loss"] = round(float(plain.evaluate(x[:8], y[:8], verbose=0)), 5)
    return out


def terminate_on_nan(replicas):
    x, y = data(32, 2)
    x[20] = np.inf   # the third batch's loss is nan
    with scope(replicas):
        model = classifier()
        model.compile(optimizer="sgd", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    seen = []
    log = tf.keras.callbacks.LambdaCallback(on_batch_end=lambda batch, logs: seen.append(batch))
    h = model.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0,
                  callbacks=[tf.keras.callbacks.TerminateOnNaN(), log])
    return {"batches": seen, "epochs": h.epoch, "loss_is_nan": [bool(np.isnan(v)) for v in h.history["loss"]],
            "stop_training": bool(model.stop_training)}


def checkpoint_formats(replicas):
    """ModelCheckpoint's epoch-numbered weights at a checkpoint prefix and ``latest_checkpoint``."""
    x, y = data()
    with scope(replicas):
        model = classifier()
        model.compile(optimizer=tf.keras.optimizers.Adam(0.01),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    # the save_and_load page's name: tf.keras 2 writes a TF checkpoint; md refuses the suffix (Keras 3's rule)
    out = {"ckpt_suffix": raised(lambda: tf.keras.callbacks.ModelCheckpoint(
        "training_1/cp-{epoch:04d}.ckpt", save_weights_only=True)).get("raises", "returned")}
    path = "training_1/cp-{epoch:04d}"
    cb = tf.keras.callbacks.ModelCheckpoint(filepath=path, save_weights_only=True, save_freq="epoch")
    model.fit(x, y, batch_size=12, epochs=2, shuffle=False, verbose=0, callbacks=[cb])
    latest = tf.train.latest_checkpoint("training_1")
    out.update(latest=os.path.relpath(latest), trained=rnd(model.layers[-1].kernel, 4))
    with scope(replicas):
        fresh = classifier()
        fresh.compile(optimizer=tf.keras.optimizers.Adam(0.01),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    fresh.load_weights(latest)
    out["restored"] = rnd(fresh.layers[-1].kernel, 4)
    out["restored_loss"] = round(float(fresh.evaluate(x, y, verbose=0)), 5)
    return out


def names_and_options(replicas):
    """Losses and metrics by string name and option; several metrics lists per output of a dict model."""
    x, y = data()
    with scope(replicas):
        model = classifier("softmax")
        model.compile(optimizer=tf.keras.optimizers.SGD(0.3), loss="sparse_categorical_crossentropy",
                      metrics=["acc", "sparse_top_k_categorical_accuracy", "sparse_categorical_crossentropy"])
    out = {"sparse": history(model.fit(x, y, batch_size=12, epochs=2, shuffle=False, verbose=0))}
    yf = tf.keras.utils.to_categorical(y, 3)
    with scope(replicas):
        model = classifier("softmax")
        model.compile(optimizer=tf.keras.optimizers.SGD(0.3),
                      loss=tf.keras.losses.CategoricalCrossentropy(label_smoothing=0.2),
                      # named: tf.keras 2 numbers a metric's default name per process ('auc_1' on the second run)
                      metrics=[tf.keras.metrics.TopKCategoricalAccuracy(k=2), tf.keras.metrics.AUC(name="auc"),
                               tf.keras.metrics.Precision(thresholds=[0.3, 0.4], name="precision"),
                               tf.keras.metrics.Recall(thresholds=0.35, name="recall"), "mae",
                               tf.keras.metrics.MeanIoU(num_classes=3, sparse_y_true=False, sparse_y_pred=False,
                                                        name="iou")])
    h = model.fit(x, yf, batch_size=12, epochs=2, shuffle=False, verbose=0)
    out["one_hot"] = {k: rnd(v, 5) for k, v in sorted(h.history.items())}
    with scope(replicas):
        model = classifier()
        model.compile(optimizer=tf.keras.optimizers.SGD(0.3),
                      loss=tf.keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1),
                      metrics=[tf.keras.metrics.CategoricalAccuracy()], weighted_metrics=["mse"])
    sw = np.linspace(0.2, 1.8, len(x)).astype("float32")
    h = model.fit(x, yf, sample_weight=sw, batch_size=12, epochs=2, shuffle=False, verbose=0)
    out["logits_weighted"] = history(h)
    return out


def output_dict(replicas):
    x, y = data()
    with scope(replicas):
        inputs = tf.keras.Input(shape=(4,), name="features")
        hidden = tf.keras.layers.Dense(8, activation="relu")(inputs)
        cls = tf.keras.layers.Dense(3, activation="softmax", name="cls")(hidden)
        reg = tf.keras.layers.Dense(1, name="reg")(hidden)
        model = tf.keras.Model(inputs=inputs, outputs={"cls": cls, "reg": reg})
        deterministic(model, 0.3)
        model.compile(optimizer=tf.keras.optimizers.Adam(0.02),
                      loss={"cls": "sparse_categorical_crossentropy", "reg": "mae"},
                      loss_weights={"cls": 1.0, "reg": 0.5},
                      metrics={"cls": ["acc", tf.keras.metrics.SparseTopKCategoricalAccuracy(k=2)],
                               "reg": ["mse", tf.keras.metrics.RootMeanSquaredError()]})
    target = {"cls": y, "reg": x[:, :1] * 0.5}
    h = model.fit({"features": x}, target, batch_size=12, epochs=2, shuffle=False, verbose=0)
    out = {"history": history(h)}
    out["evaluate"] = {k: round(float(v), 5) for k, v in sorted(
        model.evaluate(x, target, batch_size=8, return_dict=True, verbose=0).items())}
    pred = model.predict(x[:4], verbose=0)
    out["predict_keys"] = sorted(pred)
    out["predict"] = {k: rnd(v, 5) for k, v in sorted(pred.items())}
    out["metrics_names"] = model.metrics_names
    out["copies_agree"] = copies_agree(model.trainable_variables)
    return out


REPLICATED = [callbacks, terminate_on_nan, checkpoint_formats, names_and_options, output_dict]
PROGRAMS = []
