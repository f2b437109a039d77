"""tensorflow.org's tutorials/keras/regression, typed as printed with ``tf.`` -> ``md.``.

Data: a synthetic Auto MPG table of the tutorial's columns (never downloaded), as the numpy arrays the
tutorial makes from its pandas DataFrames (``np.array(train_features)``, ``train_features['Horsepower']``);
the one-hot ``Origin`` columns are floats. 40 training rows, so ``validation_split=0.2`` leaves one
batch of 32 and fit's shuffle only reorders a sum. The Dense layers' weights are set from a fixed
pattern after the model is built (the Normalization layer keeps what ``adapt`` computed).
Substitution: ``tf.linspace`` is torch's on md.
"""

import os

import numpy as np

from _tf_core_common import copies_agree, deterministic, history, linspace, raised, rnd, scope, tf

COLUMNS = ['Cylinders', 'Displacement', 'Horsepower', 'Weight', 'Acceleration', 'Model Year',
           'Europe', 'Japan', 'USA']


def _auto_mpg(n, seed):
    """(features, labels) like the tutorial's ``train_features``/``train_labels`` after ``pop('MPG')``."""
    rng = np.random.RandomState(seed)
    cylinders = rng.choice([4.0, 6.0, 8.0], size=n)
    horsepower = 40 + cylinders * 12 + rng.rand(n) * 30
    weight = 1500 + cylinders * 300 + rng.rand(n) * 400
    origin = np.eye(3)[rng.randint(0, 3, size=n)]
    features = np.column_stack([cylinders, cylinders * 40 + rng.rand(n) * 20, horsepower, weight,
                                10 + rng.rand(n) * 10, 70 + rng.randint(0, 13, size=n), origin])
    labels = 50 - horsepower * 0.15 - weight * 0.004 + rng.rand(n) * 2
    return features, labels


def build_and_compile_model(norm):
    model = tf.keras.Sequential([
        norm,
        tf.keras.layers.Dense(64, activation='relu'),
        tf.keras.layers.Dense(64, activation='relu'),
        tf.keras.layers.Dense(1)
    ])
    model.compile(loss='mean_absolute_error',
                  optimizer=tf.keras.optimizers.Adam(0.001))
    return model


def _fixed(model, first=1):
    """Fixed weights for every layer past the normalizer (the tutorial's are random)."""
    for layer in model.layers[first:]:
        deterministic(layer)
    return model


def regression(replicas):
    layers = tf.keras.layers
    train_features, train_labels = _auto_mpg(40, 1)
    test_features, test_labels = _auto_mpg(12, 2)
    out = {}
    with scope(replicas):   # under a strategy: every layer made in its scope
        normalizer = tf.keras.layers.Normalization(axis=-1)
        normalizer.adapt(np.array(train_features))   # TF builds its variables here: in the scope
    out["mean"] = rnd(normalizer.mean.numpy(), 3)
    first = np.array(train_features[:1])
    out["normalized"] = rnd(normalizer(first).numpy(), 4)

    horsepower = np.array(train_features[:, COLUMNS.index('Horsepower')])
    with scope(replicas):
        horsepower_normalizer = layers.Normalization(input_shape=[1, ], axis=None)
        horsepower_normalizer.adapt(horsepower)
        horsepower_model = tf.keras.Sequential([
            horsepower_normalizer,
            layers.Dense(units=1)
        ])
        _fixed(horsepower_model)
    out["summary_params"] = horsepower_model.count_params()
    out["hp_predict"] = rnd(horsepower_model.predict(horsepower[:10], verbose=0), 4)
    with scope(replicas):
        horsepower_model.compile(
            optimizer=tf.keras.optimizers.Adam(learning_rate=0.1),
            loss='mean_absolute_error')
    h = horsepower_model.fit(train_features[:, 2], train_labels, epochs=100, verbose=0,
                             validation_split=0.2)
    hist = history(h)
    out["hp_fit_last"] = {k: v[-3:] for k, v in hist.items()}
    out["hp_epoch"] = h.epoch[-1]
    out["hp_test"] = rnd(horsepower_model.evaluate(test_features[:, 2], test_labels, verbose=0), 4)
    x = linspace(0.0, 250, 251)
    out["hp_line"] = rnd(horsepower_model.predict(x, verbose=0)[::50], 3)

    with scope(replicas):
        linear_model = tf.keras.Sequential([
            normalizer,
            layers.Dense(units=1)
        ])
        linear_model.build((None, 9))   # not in the tutorial: built to set its weights before predict
        _fixed(linear_model)
    out["linear_predict"] = rnd(linear_model.predict(train_features[:10], verbose=0), 4)
    out["linear_kernel_shape"] = list(linear_model.layers[1].kernel.shape)
    with scope(replicas):
        linear_model.compile(
            optimizer=tf.keras.optimizers.Adam(learning_rate=0.1),
            loss='mean_absolute_error')
    h = linear_model.fit(train_features, train_labels, epochs=100, verbose=0, validation_split=0.2)
    out["linear_fit_last"] = {k: v[-3:] for k, v in history(h).items()}
    out["linear_test"] = rnd(linear_model.evaluate(test_features, test_labels, verbose=0), 4)

    with scope(replicas):
        dnn_horsepower_model = _fixed(build_and_compile_model(horsepower_normalizer))
    h = dnn_horsepower_model.fit(train_features[:, 2], train_labels, validation_split=0.2,
                                 verbose=0, epochs=100)
    out["dnn_hp_fit_last"] = {k: v[-3:] for k, v in history(h).items()}
    with scope(replicas):
        dnn_model = build_and_compile_model(normalizer)
        dnn_model.build((None, 9))      # as linear_model
        _fixed(dnn_model)
    h = dnn_model.fit(train_features, train_labels, validation_split=0.2, verbose=0, epochs=100)
    out["dnn_fit_last"] = {k: v[-3:] for k, v in history(h).items()}
    out["dnn_test"] = rnd(dnn_model.evaluate(test_features, test_labels, verbose=0), 4)
    test_predictions = dnn_model.predict(test_features, verbose=0).flatten()
    out["test_predictions"] = rnd(test_predictions[:4], 3)
    out["error_mean"] = rnd(np.mean(test_predictions - test_labels), 3)
    dnn_model.save('dnn_model.keras')
    out["reloaded_test"] = raised(lambda: rnd(tf.keras.models.load_model('dnn_model.keras').evaluate(
        test_features, test_labels, verbose=0), 4))
    out["saved"] = os.path.exists('dnn_model.keras')
    out["copies_agree"] = copies_agree(dnn_model.trainable_variables + linear_model.trainable_variables)
    return out


PROGRAMS = []
REPLICATED = [regression]
