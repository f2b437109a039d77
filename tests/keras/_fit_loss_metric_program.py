"""Losses and metrics in ``fit``/``evaluate`` and a custom loop, written once for ``tf`` = TensorFlow or multidev.

``python tests/keras/_fit_loss_metric_program.py tf`` (TensorFlow 2.21's python) prints one JSON dict
``{"1": {case: observation}, "2": {...}}``: each case on one device and under a MirroredStrategy over
2 logical CPUs (``tests/keras/test_fit_loss_metric.py`` compares). An observation is the history
(rounded to 6 significant digits), ``evaluate``'s dict, or the exception's type name.
"""

import contextlib
import json
import sys
import warnings

import numpy as np

if sys.argv[1:] == ["tf"]:
    import tensorflow as tf
else:
    import multidev as tf

tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
K, L = tf.keras, tf.keras.layers
rng = np.random.RandomState(11)
N = 12
X = rng.randn(N, 4).astype("float32")
Y_IDS = rng.randint(0, 3, N).astype("int64")
Y_ONEHOT = np.eye(3, dtype="float32")[Y_IDS]
Y_BIN = rng.randint(0, 2, (N, 1)).astype("float32")
Y_REG = rng.randn(N, 1).astype("float32")
X_SEQ = rng.randn(N, 5, 4).astype("float32")
Y_SEQ = rng.randint(0, 3, (N, 5)).astype("int64")
SW = np.linspace(0.5, 2.0, N).astype("float32")
W1 = (np.arange(12).reshape(4, 3) / 10.0 - 0.5).astype("float32")
STRATEGY = {}


def scope(replicas):
    if replicas == 1:
        return contextlib.nullcontext()
    if "s" not in STRATEGY:
        STRATEGY["s"] = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    return STRATEGY["s"].scope()


def model(units, activation=None, seq=False):
    """Dense(units) on 4 features (or on each of 5 timesteps), weights fixed."""
    m = K.Sequential([K.Input((5, 4) if seq else (4,)), L.Dense(units, activation=activation)])
    m.set_weights([(np.arange(4 * units).reshape(4, units) / (4.0 * units) - 0.4).astype("float32"),
                   np.zeros(units, "float32")])
    return m


def rounded(value):
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [rounded(v) for v in value]
    value = np.asarray(value, "float64")
    return float(f"{float(value):.6g}") if value.ndim == 0 else rounded(value.tolist())


def fitted(replicas, units, activation, loss, metrics, y, seq=False, optimizer=None, **fit):
    with scope(replicas):
        m = model(units, activation, seq)
        m.compile(optimizer() if optimizer else K.optimizers.SGD(0.1), loss=loss, metrics=metrics)
    history = m.fit(X_SEQ if seq else X, y, batch_size=4, epochs=2, shuffle=False, verbose=0, **fit)
    evaluated = m.evaluate(X_SEQ if seq else X, y, batch_size=4, verbose=0, return_dict=True)
    weights = [rounded(float(np.abs(w).sum())) for w in m.get_weights()]
    return {"h": rounded(history.history), "e": rounded(evaluated), "w": weights}


def excluding_bias():
    opt = K.optimizers.AdamW(0.05, weight_decay=0.5)
    opt.exclude_from_weight_decay(var_names=["bias"])
    return opt


CASES = {
    "sparse_acc_names": lambda r: fitted(r, 3, "softmax", "sparse_categorical_crossentropy",
                                         ["acc", "accuracy", K.metrics.SparseTopKCategoricalAccuracy(k=2)], Y_IDS),
    "crossentropy_name": lambda r: fitted(r, 3, "softmax", "sparse_categorical_crossentropy", ["crossentropy"], Y_IDS),
    "ce_name": lambda r: fitted(r, 1, "sigmoid", "binary_crossentropy", ["ce"], Y_BIN),
    "sparse_logits_metrics": lambda r: fitted(r, 3, None, K.losses.SparseCategoricalCrossentropy(from_logits=True),
                                              ["accuracy", K.metrics.SparseCategoricalCrossentropy(from_logits=True)],
                                              Y_IDS),
    "categorical_acc": lambda r: fitted(r, 3, "softmax", "categorical_crossentropy",
                                        ["accuracy", K.metrics.TopKCategoricalAccuracy(k=2), "categorical_crossentropy"],
                                        Y_ONEHOT),
    "binary_metrics": lambda r: fitted(r, 1, "sigmoid", "binary_crossentropy",
                                       ["accuracy", "acc", K.metrics.AUC(), K.metrics.AUC(curve="PR"),
                                        K.metrics.Precision(), K.metrics.Recall(thresholds=[0.3, 0.6])], Y_BIN),
    "regression_metrics": lambda r: fitted(r, 1, None, "mse", ["mae", K.metrics.RootMeanSquaredError(),
                                                               K.metrics.MeanAbsolutePercentageError(), "accuracy"],
                                           Y_REG),
    "scores": lambda r: fitted(r, 3, "softmax", "categorical_crossentropy",
                               [K.metrics.F1Score(average="macro", threshold=0.4), K.metrics.OneHotMeanIoU(3),
                                K.metrics.AUC(multi_label=True), K.metrics.RecallAtPrecision(0.3)], Y_ONEHOT),
    "r2": lambda r: fitted(r, 1, None, "mse", [K.metrics.R2Score(), K.metrics.CosineSimilarity()], Y_REG),
    "adamw_exclude_bias": lambda r: fitted(r, 1, None, "mse", [], Y_REG, optimizer=excluding_bias),
    "nadam_clipnorm": lambda r: fitted(r, 1, None, "mse", [], Y_REG,
                                       optimizer=lambda: K.optimizers.Nadam(0.05, global_clipnorm=0.5)),
    "adam_ema": lambda r: fitted(r, 1, None, "mse", [], Y_REG,
                                 optimizer=lambda: K.optimizers.Adam(0.05, use_ema=True, ema_momentum=0.5)),
    "huber_logcosh": lambda r: fitted(r, 1, None, K.losses.Huber(delta=0.5), [K.metrics.LogCoshError()], Y_REG),
    "label_smoothing": lambda r: fitted(r, 3, "softmax", K.losses.CategoricalCrossentropy(label_smoothing=0.2),
                                        ["accuracy"], Y_ONEHOT),
    "focal": lambda r: fitted(r, 1, "sigmoid", K.losses.BinaryFocalCrossentropy(gamma=2.0), ["accuracy"], Y_BIN),
    "sum_reduction": lambda r: fitted(r, 1, None, K.losses.MeanSquaredError(reduction="sum"), [], Y_REG),
    "sequence_ignore_class": lambda r: fitted(r, 3, "softmax", K.losses.SparseCategoricalCrossentropy(ignore_class=0),
                                              ["accuracy"], Y_SEQ, seq=True),
    "sequence_timestep_weights": lambda r: fitted(r, 3, "softmax", "sparse_categorical_crossentropy", ["accuracy"],
                                                  Y_SEQ, seq=True,
                                                  sample_weight=np.linspace(0, 1, N * 5).reshape(N, 5).astype("float32")),
    "early_stopping_auto_unknown": lambda r: fitted(r, 1, None, "mse", [], Y_REG, callbacks=[
        K.callbacks.EarlyStopping(monitor="val_missing", patience=0)]),
    "sequence_batch_weights": lambda r: fitted(r, 3, "softmax", "sparse_categorical_crossentropy", ["accuracy"],
                                               Y_SEQ, seq=True, sample_weight=SW),
    "class_and_sample_weight": lambda r: fitted(r, 3, "softmax", "sparse_categorical_crossentropy", ["accuracy"],
                                                Y_IDS, sample_weight=SW, class_weight={0: 1.0, 1: 3.0, 2: 0.5}),
}


def early_stopping_missing_metric(replicas):
    """TF warns that the monitored metric is missing and trains on (mode='auto' refuses an unknown name)."""
    stop = K.callbacks.EarlyStopping(monitor="val_missing", patience=0, mode="min")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fitted(replicas, 1, None, "mse", [], Y_REG, callbacks=[stop])
    messages = [str(w.message) for w in caught if "val_missing" in str(w.message)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fitted(replicas, 1, None, "mse", [], Y_REG, callbacks=[
            K.callbacks.ReduceLROnPlateau(monitor="val_missing", mode="min")])
    messages += [str(w.message) for w in caught if "val_missing" in str(w.message)]
    return {**out, "warnings": messages}


def custom_loop(replicas):
    """Per-example losses (reduction NONE) averaged by compute_average_loss, and the default reduction,
    summed over the replicas; one step of SGD."""
    with scope(replicas):
        m = model(3, None)
        loss_none = K.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
        loss_mean = K.losses.SparseCategoricalCrossentropy(from_logits=True)
        opt = K.optimizers.SGD(0.1)
    strategy = STRATEGY["s"] if replicas == 2 else tf.distribute.get_strategy()
    dataset = tf.data.Dataset.from_tensor_slices((X, Y_IDS, SW)).batch(8)
    dist = strategy.experimental_distribute_dataset(dataset)

    def step(x, y, w):
        with tf.GradientTape() as tape:
            logits = m(x, training=True)
            weighted = tf.nn.compute_average_loss(loss_none(y, logits, sample_weight=w), global_batch_size=8)
            plain = loss_mean(y, logits)
        grads = tape.gradient(weighted, m.trainable_variables)
        opt.apply_gradients(zip(grads, m.trainable_variables))
        return weighted, plain

    out = []
    for x, y, w in dist:
        weighted, plain = strategy.run(step, args=(x, y, w))
        out.append([float(strategy.reduce("SUM", weighted, axis=None)), float(strategy.reduce("SUM", plain, axis=None))])
    return {"losses": rounded(out), "w": rounded(float(np.sum([np.abs(v).sum() for v in m.get_weights()])))}


def main():
    results = {}
    for replicas in (1, 2):
        results[str(replicas)] = out = {}
        for name, case in [*CASES.items(), ("early_stopping_missing_metric", early_stopping_missing_metric),
                           ("custom_loop", custom_loop)]:
            try:
                out[name] = case(replicas)
            except Exception as e:  # noqa: BLE001 - the observation is the exception's type
                out[name] = {"raises": type(e).__name__, "message": str(e)[:300]}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
