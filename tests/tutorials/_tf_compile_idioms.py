"""``compile`` options as users type them (a loss's reduction, metrics of logits, outputs/targets/sample weights
by name, custom Loss classes, temporal weights), layers with state or penalties in ``fit``, and what callbacks
see, written once for ``tf`` = TensorFlow or multidev (``_tf_more4_programs.py``)."""

import os

import numpy as np

from _tf_core_common import deterministic, history, rnd, scope, tf
from _tf_fit_idioms import classifier, data


def _xent():
    return tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def reductions(replicas):
    """A loss compiled with ``reduction="none"`` trains on the per-example losses' sum and logs their mean."""
    x, y = data()
    out = {}
    for reduction in ("none", "sum"):
        with scope(replicas):
            model = classifier()
            model.compile(tf.keras.optimizers.SGD(0.02), metrics=["accuracy"],
                          loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction))
        h = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        out[reduction] = {"history": history(h), "kernel": rnd(model.layers[-1].kernel, 5),
                          "evaluate": rnd(model.evaluate(x, y, batch_size=8, verbose=0), 5)}
    return out


def logit_metrics(replicas):
    """Threshold metrics given logits (a from_logits loss beside a plain AUC) and validation sample weights."""
    x, _ = data()
    y = (x[:, 0] > 0).astype("float32")
    with scope(replicas):
        model = tf.keras.Sequential([tf.keras.Input(shape=(4,)), tf.keras.layers.Dense(4, activation="relu"),
                                     tf.keras.layers.Dense(1)])
        deterministic(model, 0.3)
        model.compile(tf.keras.optimizers.SGD(0.3),
                      tf.keras.losses.BinaryCrossentropy(from_logits=True, label_smoothing=0.1),
                      metrics=["acc", tf.keras.metrics.AUC(from_logits=True, name="auc"),
                               tf.keras.metrics.AUC(curve="PR", num_thresholds=50, name="pr"),
                               tf.keras.metrics.BinaryAccuracy(threshold=0.0, name="ba"),
                               tf.keras.metrics.Precision(thresholds=[0.0, 0.5, 1.0], name="precision")])
    h = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0,
                  validation_data=(x[:8], y[:8], np.arange(8.0)))
    return {"history": {k: rnd(v, 5) for k, v in sorted(h.history.items())}, "kernel": rnd(model.layers[-1].kernel, 5)}


def _two_outputs(kind):
    """Two outputs: a dict out of sorted order (its layers named as its keys: tf.keras 2 names the logs by
    layer, Keras 3 and md by key) or a list."""
    names = ("zz", "bb") if kind == "dict" else ("a", "b")
    inputs = tf.keras.Input(shape=(4,))
    hidden = tf.keras.layers.Dense(6, activation="relu")(inputs)
    a, b = tf.keras.layers.Dense(3, name=names[0])(hidden), tf.keras.layers.Dense(1, name=names[1])(hidden)
    model = tf.keras.Model(inputs, {"zz": a, "bb": b} if kind == "dict" else [a, b])
    return deterministic(model, 0.3)


def outputs_by_name(replicas):
    """Outputs in a dict out of sorted order, targets and sample weights by name or by position."""
    x, y = data()
    yb, sw = x[:, :1] * 0.5, np.linspace(0.2, 1.8, len(x)).astype("float32")
    with scope(replicas):
        model = _two_outputs("dict")
        model.compile(tf.keras.optimizers.SGD(0.1), loss={"bb": "mse", "zz": _xent()}, loss_weights={"bb": 0.5},
                      weighted_metrics={"zz": ["accuracy"], "bb": ["mae"]})
    h = model.fit(x, {"bb": yb, "zz": y}, sample_weight={"bb": sw, "zz": sw[::-1].copy()}, batch_size=8, epochs=2,
                  shuffle=False, verbose=0)
    ds = tf.data.Dataset.from_tensor_slices((x, {"zz": y, "bb": yb}, {"zz": sw, "bb": sw})).batch(6)
    out = {"dict": history(h),
           "dict_evaluate": rnd(sorted(model.evaluate(ds, return_dict=True, verbose=0).values()), 5),
           "dict_predict": sorted(model.predict(x[:2], verbose=0))}
    with scope(replicas):
        model = _two_outputs("list")
        model.compile(tf.keras.optimizers.SGD(0.1), loss=[_xent(), "mse"], weighted_metrics=[["accuracy"], []])
    h = model.fit(x, [y, yb], sample_weight=[sw, sw[::-1].copy()], batch_size=8, epochs=2, shuffle=False, verbose=0)
    out["list"] = history(h)
    return out


def custom_losses(replicas):
    x, y = data()
    yb = x[:, 1:2] * 0.5

    class Scaled(tf.keras.losses.Loss):
        def call(self, y_true, y_pred):
            return tf.reduce_mean(tf.square(y_true - y_pred), axis=-1) * 2.0

    class Scalar(tf.keras.losses.Loss):
        def call(self, y_true, y_pred):
            return tf.reduce_mean(tf.abs(y_true - y_pred))

    out = {}
    for name, loss in [("scaled", Scaled()), ("scaled_sum", Scaled(reduction="sum")), ("scalar", Scalar()),
                       ("function", lambda yt, yp: tf.reduce_mean(tf.abs(yt - yp), axis=-1))]:
        with scope(replicas):
            model = _two_outputs("list")
            model.compile(tf.keras.optimizers.SGD(0.1), loss=[_xent(), loss], loss_weights=[0.0, 1.0])
        h = model.fit(x, [y, yb], batch_size=8, epochs=2, shuffle=False, verbose=0)
        out[name] = {"loss": rnd(h.history["loss"], 5), "kernel": rnd(model.get_layer("b").kernel, 5)}
    return out


def temporal_weights(replicas):
    seq_x = np.random.RandomState(1).randn(8, 5, 3).astype("float32")
    seq_y = (np.abs(seq_x.sum(-1)) * 2).astype("int64") % 3
    weights = (np.arange(40).reshape(8, 5) % 3 != 0).astype("float32")
    with scope(replicas):
        model = tf.keras.Sequential([tf.keras.Input(shape=(5, 3)), tf.keras.layers.Dense(4, activation="relu"),
                                     tf.keras.layers.Dense(3)])
        deterministic(model, 0.3)
        model.compile(tf.keras.optimizers.SGD(0.2), _xent(), weighted_metrics=["accuracy"])
    h = model.fit(seq_x, seq_y, sample_weight=weights, batch_size=4, epochs=2, shuffle=False, verbose=0)
    return {"history": history(h), "kernel": rnd(model.layers[-1].kernel, 5)}


def layers_in_fit(replicas):
    """BatchNormalization's moving statistics, weight and activity penalties, an Embedding's mask."""
    x, y = data()
    with scope(replicas):
        model = tf.keras.Sequential([tf.keras.Input(shape=(4,)), tf.keras.layers.Dense(8),
                                     tf.keras.layers.BatchNormalization(momentum=0.5),
                                     tf.keras.layers.Activation("relu"), tf.keras.layers.Dense(3)])
        deterministic(model, 0.3)
        model.compile(tf.keras.optimizers.SGD(0.1), _xent())
    h = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    norm = model.layers[1]
    out = {"bn": {"history": history(h), "moving": rnd([norm.moving_mean, norm.moving_variance], 4),
                  "predict": rnd(model.predict(x[:3], verbose=0), 4)}}
    l2, l1 = tf.keras.regularizers.l2(0.01), tf.keras.regularizers.l1(0.01)
    with scope(replicas):
        model = tf.keras.Sequential([tf.keras.Input(shape=(4,)), tf.keras.layers.Dense(
            8, activation="relu", kernel_regularizer=l2, activity_regularizer=l1),
            tf.keras.layers.Dense(3, bias_regularizer="l1")])
        deterministic(model, 0.3)
        model.compile(tf.keras.optimizers.SGD(0.1), _xent())
    h = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    out["penalties"] = {"history": history(h), "kernel": rnd(model.layers[-1].kernel, 5),
                        "evaluate": round(float(model.evaluate(x, y, verbose=0)), 5)}
    seq = np.array([[1, 2, 3, 0, 0], [4, 5, 0, 0, 0], [6, 7, 8, 9, 1], [2, 0, 0, 0, 0]] * 2)
    with scope(replicas):
        model = tf.keras.Sequential([tf.keras.Input(shape=(5,)), tf.keras.layers.Embedding(10, 4, mask_zero=True),
                                     tf.keras.layers.GlobalAveragePooling1D(), tf.keras.layers.Dense(1)])
        deterministic(model, 0.3)
        model.compile(tf.keras.optimizers.Adam(0.05), tf.keras.losses.BinaryCrossentropy(from_logits=True),
                      metrics=["accuracy"])
    h = model.fit(seq, np.array([0, 1, 1, 0] * 2), batch_size=4, epochs=2, shuffle=False, verbose=0)
    out["masked"] = {"history": history(h), "embeddings": rnd(model.layers[0].embeddings, 4)}
    return out


def _logs(logs):
    return {k: round(float(v), 5) for k, v in sorted((logs or {}).items())}


def callback_views(replicas):
    """What a Callback subclass sees (batch and epoch logs, the rate it set), EarlyStopping restoring its best
    weights, ModelCheckpoint every 2 batches at a formatted name."""
    x, y = data()
    events = []

    class Recorder(tf.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            events.append(["batch", batch, _logs(logs), round(float(self.model.optimizer.learning_rate.numpy()), 5)])

        def on_test_batch_end(self, batch, logs=None):
            events.append(["test_batch", batch, _logs(logs)])

        def on_epoch_end(self, epoch, logs=None):
            events.append(["epoch", epoch, _logs(logs)])
            self.model.optimizer.learning_rate = 0.05

        def on_predict_batch_end(self, batch, logs=None):
            events.append(["predict_batch", batch, sorted(logs), list(np.asarray(logs["outputs"]).shape)])

    with scope(replicas):
        model = classifier()
        model.compile(tf.keras.optimizers.SGD(0.2), _xent(), metrics=["accuracy"])
    model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0, validation_data=(x[:10], y[:10]),
              validation_batch_size=5, callbacks=[Recorder()])
    model.evaluate(x, y, batch_size=12, verbose=0, callbacks=[Recorder()])
    model.predict(x[:10], batch_size=4, verbose=0, callbacks=[Recorder()])
    out = {"events": events}
    with scope(replicas):
        model = classifier()
        model.compile(tf.keras.optimizers.SGD(0.5), _xent())
    stop = tf.keras.callbacks.EarlyStopping(monitor="val_loss", patience=1, restore_best_weights=True,
                                            start_from_epoch=1, min_delta=0.05)
    save = tf.keras.callbacks.ModelCheckpoint("w/{epoch:02d}-{loss:.3f}.weights.h5", save_weights_only=True,
                                              save_freq=2)
    h = model.fit(x, y, batch_size=8, epochs=6, shuffle=False, verbose=0, validation_data=(x[:8], y[:8]),
                  callbacks=[stop, save])
    out.update(stopping=history(h), stopped_epoch=stop.stopped_epoch, restored=rnd(model.layers[-1].kernel, 5),
               saved=sorted(os.listdir("w")))
    return out


REPLICATED = [reductions, logit_metrics, outputs_by_name, custom_losses, temporal_weights, layers_in_fit,
              callback_views]
PROGRAMS = []
