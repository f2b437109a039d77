"""Keras idioms of TF programs, written once for ``tf`` = TensorFlow or multidev (``tests/keras/test_tf_idioms.py``).

``python tests/keras/_tf_idioms_program.py tf`` (TensorFlow 2.21's python) or ``... md`` prints one JSON
dict ``{"1": {idiom: observation}, "2": {...}}``: each idiom on one device and under a MirroredStrategy
over 2 logical CPUs. An observation is the loss history and a fingerprint of the weights after ``fit``
(their sum and sum of squares), or the exception's type name. The weights start equal on both sides
(set from numpy after build), the data is fixed and ``shuffle=False``.
"""

import contextlib
import json
import os
import sys
import tempfile

import numpy as np

if sys.argv[1] == "tf":
    import tensorflow as tf
else:
    import multidev as tf

tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
K, L = tf.keras, tf.keras.layers
rng = np.random.RandomState(0)
X = rng.randn(10, 4).astype("float32")
W_TRUE = np.array([[1.0], [-2.0], [0.5], [0.3]], "float32")
Y = X @ W_TRUE + np.float32(0.1)
YC = np.array([0, 1, 2, 1, 0, 2, 2, 1, 0, 1], "int64")
XV = rng.randn(6, 4).astype("float32")
YV = XV @ W_TRUE
SW = np.linspace(0.5, 2.0, 10).astype("float32")
W1 = (np.arange(12).reshape(4, 3) / 10.0 - 0.5).astype("float32")
B1 = np.array([0.1, -0.1, 0.05], "float32")
W2 = (np.arange(3).reshape(3, 1) / 5.0 - 0.2).astype("float32")
W2C = (np.arange(9).reshape(3, 3) / 7.0 - 0.5).astype("float32")
STRATEGY = {}


def scope(replicas):
    if replicas == 1:
        return contextlib.nullcontext()
    if "s" not in STRATEGY:   # one strategy for the whole run (TF's collectives want that)
        STRATEGY["s"] = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    return STRATEGY["s"].scope()


def regression_model():
    model = K.Sequential([K.Input((4,)), L.Dense(3, activation="tanh"), L.Dense(1)])
    model.set_weights([W1, B1, W2, np.zeros(1, "float32")])
    return model


def classifier():
    model = K.Sequential([K.Input((4,)), L.Dense(3, activation="tanh"), L.Dense(3, activation="softmax")])
    model.set_weights([W1, B1, W2C, np.zeros(3, "float32")])
    return model


def observe(model, history=None, **extra):
    ws = [np.asarray(w, "float64") for w in model.get_weights()]
    out = {"w": [round(float(sum(w.sum() for w in ws)), 5), round(float(sum((w * w).sum() for w in ws)), 5)]}
    if history is not None:
        out["h"] = {k: [round(float(v), 5) for v in vs] for k, vs in sorted(history.history.items())}
    return {**out, **extra}


def trained(replicas, optimizer=None, loss="mse", model=None, x=X, y=Y, **fit):
    with scope(replicas):
        model = model or regression_model()
        model.compile(optimizer=optimizer or K.optimizers.SGD(0.1), loss=loss)
    fit = {"batch_size": 4, "epochs": 2, "shuffle": False, "verbose": 0, **fit}
    fit = {k: v for k, v in fit.items() if v is not None}
    history = model.fit(x, y, **fit)
    return model, history


def fit_plain(r):          # 10 examples, batch 4: the last batch has 2 (one per replica)
    return observe(*trained(r))


def fit_batch3(r):         # batches of 3 split [2, 1]; the last one (1 example) [1, 0]
    return observe(*trained(r, batch_size=3))


def sample_weight(r):
    return observe(*trained(r, sample_weight=SW))


def class_weight_accuracy(r):
    with scope(r):
        model = classifier()
        model.compile(optimizer=K.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = model.fit(X, YC, batch_size=4, epochs=2, shuffle=False, verbose=0, class_weight={0: 1.0, 1: 2.0, 2: 0.5},
                        validation_data=(XV, YC[:6]))
    return observe(model, history)


def weighted_metrics_and_steps(r):   # the same metric plain and weighted; evaluate/predict with steps
    with scope(r):
        model = classifier()
        model.compile(optimizer=K.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy", metrics=["accuracy"],
                      weighted_metrics=["accuracy"])
    history = model.fit(X, YC, batch_size=4, epochs=2, shuffle=False, verbose=0, class_weight={0: 1.0, 1: 2.0, 2: 0.5},
                        validation_data=(XV, YC[:6]), validation_batch_size=2)
    repeated = tf.data.Dataset.from_tensor_slices((X, YC)).repeat().batch(4)
    evaluated = model.evaluate(repeated, steps=3, return_dict=True, verbose=0)
    predicted = np.asarray(model.predict(tf.data.Dataset.from_tensor_slices(X).repeat().batch(4), steps=3, verbose=0))
    return observe(model, history, evaluate={k: round(float(v), 5) for k, v in sorted(evaluated.items())},
                   predict=[list(predicted.shape), round(float(predicted.sum()), 5)])


def validation_split(r):
    return observe(*trained(r, validation_split=0.2))


def validation_dataset(r):
    return observe(*trained(r, validation_data=tf.data.Dataset.from_tensor_slices((XV, YV)).batch(4)))


def repeated_dataset_steps_per_epoch(r):
    data = tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(4)
    return observe(*trained(r, x=data, y=None, batch_size=None, shuffle=None, steps_per_epoch=3))


def python_generator(r):
    def batches():
        while True:
            for i in range(0, 8, 4):
                yield X[i:i + 4], Y[i:i + 4]

    return observe(*trained(r, x=batches(), y=None, batch_size=None, shuffle=None, steps_per_epoch=2))


def dataset_with_batch_size(r):   # Keras 3 ignores batch_size for a dataset
    data = tf.data.Dataset.from_tensor_slices((X, Y)).batch(4)
    return observe(*trained(r, x=data, y=None, batch_size=8, shuffle=None))


def initial_epoch(r):
    model, history = trained(r, epochs=3, initial_epoch=1)
    return observe(model, history, epochs=list(history.epoch))


def early_stopping_restores_best(r):
    stop = K.callbacks.EarlyStopping(monitor="val_loss", patience=1, restore_best_weights=True)
    model, history = trained(r, optimizer=K.optimizers.SGD(0.5), epochs=8, validation_data=(XV, YV), callbacks=[stop])
    return observe(model, history, stopped=stop.stopped_epoch)


def checkpoint_best_relative_path(r):
    save = K.callbacks.ModelCheckpoint("ckpt/model.weights.h5", save_weights_only=True, save_best_only=True,
                                       monitor="val_loss")
    trained(r, optimizer=K.optimizers.SGD(0.5), epochs=4, validation_data=(XV, YV), callbacks=[save])
    with scope(r):
        model = regression_model()
    model.load_weights("ckpt/model.weights.h5")
    return observe(model)


def lr_callbacks(r):
    plateau = K.callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=0, min_delta=100.0, min_lr=0.01)
    schedule = K.callbacks.LearningRateScheduler(lambda epoch, lr: lr * 0.8 if epoch > 1 else lr)
    seen = []

    class ReadsRate(K.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            rate = np.asarray(self.model.optimizer.learning_rate.numpy())
            seen.append([epoch, sorted(logs), round(float(rate), 6), int(np.asarray(self.model.optimizer.iterations))])

    return observe(*trained(r, epochs=4, callbacks=[plateau, schedule, ReadsRate()]), seen=seen)


def csv_logger(r):
    trained(r, validation_data=(XV, YV), callbacks=[K.callbacks.CSVLogger("log.csv")])
    with open("log.csv") as f:
        rows = f.read().splitlines()
    return {"header": rows[0], "rows": [[round(float(v), 5) for v in row.split(",")] for row in rows[1:]]}


def terminate_on_nan(r):
    y = Y.copy()
    y[5] = np.nan
    model, history = trained(r, y=y, epochs=3, callbacks=[K.callbacks.TerminateOnNaN()])
    return {"epochs": list(history.epoch), "loss_is_nan": [bool(np.isnan(v)) for v in history.history["loss"]]}


def single_batch_methods(r):
    with scope(r):
        model = regression_model()
        model.compile(optimizer=K.optimizers.SGD(0.1), loss="mse", metrics=["mae"])
    out = {"train": [round(float(v), 5) for v in model.train_on_batch(X[:4], Y[:4])],
           "train_dict": {k: round(float(v), 5)
                          for k, v in model.train_on_batch(X[4:], Y[4:], return_dict=True).items()},
           "test": [round(float(v), 5) for v in model.test_on_batch(XV, YV)],
           "evaluate": {k: round(float(v), 5) for k, v in model.evaluate(X, Y, batch_size=4, return_dict=True,
                                                                          verbose=0).items()}}
    predicted = np.asarray(model.predict(X, batch_size=4, verbose=0))
    out["predict"] = [list(predicted.shape), round(float(predicted.sum()), 5)]
    return observe(model, **out)


def two_outputs_loss_weights(r):
    with scope(r):
        inputs = K.Input((4,))
        hidden = L.Dense(3, activation="tanh")(inputs)
        model = K.Model(inputs, [L.Dense(1, name="a")(hidden), L.Dense(1, name="b")(hidden)])
        model.set_weights([W1, B1, W2, np.zeros(1, "float32"), -W2, np.ones(1, "float32")])
        model.compile(optimizer=K.optimizers.SGD(0.1), loss=["mse", "mae"], loss_weights=[1.0, 0.5])
    history = model.fit(X, [Y, -Y], batch_size=4, epochs=2, shuffle=False, verbose=0)
    return observe(model, loss=[round(v, 5) for v in history.history["loss"]])


def compiled_with(r, **options):
    with scope(r):
        model = regression_model()
        model.compile(optimizer=K.optimizers.SGD(0.1), loss="mse", **options)
    return observe(model, model.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0))


def run_eagerly(r):
    return compiled_with(r, run_eagerly=True)


def steps_per_execution(r):
    return compiled_with(r, steps_per_execution=2)


def frozen_nested_model_recompiled(r):
    with scope(r):
        base = K.Sequential([K.Input((4,)), L.Dense(3, activation="tanh")])
        model = K.Sequential([K.Input((4,)), base, L.Dense(1)])
        model.set_weights([W1, B1, W2, np.zeros(1, "float32")])
        model.compile(optimizer=K.optimizers.SGD(0.1), loss="mse")
    model.fit(X, Y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    base.trainable = False
    with scope(r):
        model.compile(optimizer=K.optimizers.SGD(0.1), loss="mse")
    history = model.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    return observe(model, history, first=[round(float(np.asarray(model.get_weights()[0]).sum()), 5)],
                   trainable=len(model.trainable_weights))


def unfreeze_recompiled(r):   # fine-tuning: train the head on a frozen base, unfreeze, recompile, train all
    with scope(r):
        base = K.Sequential([K.Input((4,)), L.Dense(3, activation="tanh")])
        model = K.Sequential([K.Input((4,)), base, L.Dense(1)])
        model.set_weights([W1, B1, W2, np.zeros(1, "float32")])
        base.trainable = False
        model.compile(optimizer=K.optimizers.Adam(0.05), loss="mse")
    first = model.fit(X, Y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    base.trainable = True
    with scope(r):
        model.compile(optimizer=K.optimizers.Adam(0.01), loss="mse")
    history = model.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0, validation_freq=2,
                        validation_data=(XV, YV))
    return observe(model, history, first=[round(float(v), 5) for v in first.history["loss"]])


def uneven_splits_weighted(r):   # batches of 3: replicas get [2, 1], the last batch [1, 0]
    with scope(r):
        model = classifier()
        model.compile(optimizer=K.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    before = model.evaluate(X, YC, batch_size=3, return_dict=True, verbose=0)
    history = model.fit(X, YC, batch_size=3, epochs=2, shuffle=False, verbose=0, sample_weight=SW)
    return observe(model, history, evaluate={k: round(float(v), 5) for k, v in sorted(before.items())})


def predict_on_batch(r):
    with scope(r):
        model = regression_model()
    predicted = np.asarray(model.predict_on_batch(XV))
    return [list(predicted.shape), round(float(predicted.sum()), 5)]


def seed_text_classifier(r):   # seed 002's layers and metrics, in miniature
    # (not its Nadam: Keras 3 on TF squares an Embedding's IndexedSlices gradient per token occurrence, without
    # summing a batch's repeated tokens first; tf.keras 2 and multidev use the summed, dense gradient)
    tokens = np.random.RandomState(1).randint(0, 20, size=(10, 8))
    with scope(r):
        model = K.Sequential([K.Input((8,)), L.Embedding(20, 3), L.Conv1D(4, 3, activation="relu"),
                              L.MaxPooling1D(2), L.Flatten(), L.Dense(5, activation="softmax")])
        model.set_weights([(np.sin(np.arange(w.size) + i) * 0.3).reshape(w.shape).astype("float32")
                           for i, w in enumerate(model.get_weights())])
        model.compile(optimizer=K.optimizers.SGD(0.1, momentum=0.9), loss=K.losses.SparseCategoricalCrossentropy(),
                      metrics=[K.metrics.SparseCategoricalAccuracy(), K.metrics.SparseTopKCategoricalAccuracy(k=2)])
    data = tf.data.Dataset.from_tensor_slices((tokens, YC)).batch(4).cache()
    return observe(model, model.fit(data, validation_data=data, epochs=2, verbose=0))


def dropout_training_argument(r):
    with scope(r):
        inputs = K.Input((4,))
        model = K.Model(inputs, L.Dropout(0.5)(inputs))
    off, on = np.asarray(model(X, training=False)), np.asarray(model(X, training=True))
    return {"off_is_identity": bool(np.allclose(off, X)), "predict_is_identity": bool(np.allclose(
        np.asarray(model.predict(X, verbose=0)), X)), "on_scales_kept": bool(np.allclose(on[on != 0], 2 * X[on != 0]))}


OPTIMIZERS = {
    "clipnorm": lambda: K.optimizers.SGD(0.1, clipnorm=0.05),
    "clipvalue": lambda: K.optimizers.SGD(0.1, clipvalue=0.02),
    "global_clipnorm": lambda: K.optimizers.SGD(0.1, global_clipnorm=0.05),
    "adamw_weight_decay": lambda: K.optimizers.AdamW(0.05, weight_decay=0.1),
    "sgd_weight_decay_nesterov": lambda: K.optimizers.SGD(0.1, momentum=0.9, nesterov=True, weight_decay=0.1),
    "adam_exponential_decay": lambda: K.optimizers.Adam(K.optimizers.schedules.ExponentialDecay(0.1, 2, 0.5)),
    "sgd_piecewise_constant": lambda: K.optimizers.SGD(
        K.optimizers.schedules.PiecewiseConstantDecay([2, 4], [0.1, 0.05, 0.01])),
}


def optimizers(r):
    out = {}
    for name, make in OPTIMIZERS.items():
        with scope(r):
            optimizer = make()
        out[name] = observe(*trained(r, optimizer=optimizer))
    return out


IDIOMS = [fit_plain, fit_batch3, sample_weight, class_weight_accuracy, weighted_metrics_and_steps, validation_split,
          validation_dataset, repeated_dataset_steps_per_epoch, python_generator, dataset_with_batch_size,
          initial_epoch, early_stopping_restores_best, checkpoint_best_relative_path, lr_callbacks, csv_logger,
          terminate_on_nan, single_batch_methods, two_outputs_loss_weights, run_eagerly, steps_per_execution,
          frozen_nested_model_recompiled, unfreeze_recompiled, uneven_splits_weighted, predict_on_batch,
          seed_text_classifier, dropout_training_argument, optimizers]


def main():
    results = {}
    for replicas in (1, 2):
        results[str(replicas)] = out = {}
        for idiom in IDIOMS:
            os.chdir(tempfile.mkdtemp())
            try:
                out[idiom.__name__] = idiom(replicas)
            except Exception as e:  # the observation is the exception's type
                out[idiom.__name__] = {"raises": type(e).__name__, "message": str(e)[:200]}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
