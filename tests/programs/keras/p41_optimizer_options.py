"""Keras 3's optimizer options, as keras.io's examples set them (``clipnorm`` in the text-generation and
seq2seq examples, ``global_clipnorm`` in the transformer ones, ``clipvalue``, ``use_ema`` in the vision ones):
each trains one small regression model with ``fit`` from the same initial weights (``set_weights``) on the same
batches (``shuffle=False``), and the run reports its losses and final weights (with ``use_ema``, the averages
``fit`` writes into the weights at its end).

TensorFlow 2.21 (``tensorflow-cpu`` with its ``tf.keras``, Keras 3.15 on TensorFlow, and ``tf_keras``, its legacy
Keras 2) gives the numbers of ``p41_tensorflow.json`` on one device; ``tf_keras`` gives them on a MirroredStrategy of
2 logical CPUs too, while Keras 3 on TensorFlow clips each replica's gradient before summing them (its
losses differ there; see the JSON). Shrunk: 8 features, 64 examples, batch 16, 2 epochs.
"""

import numpy as np

SOURCE = "https://keras.io/api/optimizers/"
OPTIONS = {   # name: (optimizer class, its arguments)
    "clipnorm": ("SGD", {"learning_rate": 0.1, "clipnorm": 0.5}),
    "global_clipnorm": ("SGD", {"learning_rate": 0.1, "global_clipnorm": 0.5}),
    "clipvalue": ("SGD", {"learning_rate": 0.1, "clipvalue": 0.1}),
    "use_ema": ("Adam", {"learning_rate": 0.05, "use_ema": True, "ema_momentum": 0.9}),
    "ema_overwrite_frequency": ("Adam", {"learning_rate": 0.05, "use_ema": True, "ema_momentum": 0.5,
                                         "ema_overwrite_frequency": 3}),
    "plain": ("SGD", {"learning_rate": 0.1}),
}


def data():
    """The examples, targets and initial weights (also those of TensorFlow's run)."""
    rng = np.random.RandomState(0)
    x = rng.normal(size=(64, 8)).astype("float32")
    y = (x @ rng.normal(size=(8, 1)) + 0.5).astype("float32")
    weights = [rng.normal(scale=0.5, size=s).astype("float32") for s in [(8, 4), (4,), (4, 1), (1,)]]
    return x, y, weights


def fit_with(keras, strategy, cls, kwargs, epochs=2):
    """The regression model from ``data()``'s weights, compiled with ``keras.optimizers.<cls>(**kwargs)`` and fit
    on ``data()``'s batches in order: ``(model, {"loss": [...], "weight0": ..., ...})``."""
    x, y, weights = data()
    with strategy.scope():
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(1)])
        model.set_weights(weights)
        model.compile(optimizer=getattr(keras.optimizers, cls)(**kwargs), loss="mse")
    history = model.fit(x, y, batch_size=16, epochs=epochs, shuffle=False, verbose=0).history
    return model, {"loss": history["loss"], **{f"weight{i}": w for i, w in enumerate(model.get_weights())}}


def run(keras, strategy, workdir, scale=1):
    out = {}
    for name, (cls, kwargs) in OPTIONS.items():
        model, out[name] = fit_with(keras, strategy, cls, kwargs, epochs=2 * scale)
    return {"_model": model, **out}
