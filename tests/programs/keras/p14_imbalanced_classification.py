"""keras.io/examples/structured_data/imbalanced_classification: an MLP with the confusion-count metrics,
class weights, a per-epoch ``.keras`` checkpoint and ``validation_data``.

Shrunk: 16 features, 128 examples (about 10% positive), layers of 32, batch 32, 2 epochs; Dropout rates 0.
"""

import os

import numpy as np

SOURCE = "https://keras.io/examples/structured_data/imbalanced_classification/"


def run(keras, strategy, workdir, scale=1):
    rng = np.random.RandomState(0)
    n = 128 * scale
    features = rng.randn(n, 16).astype("float32")
    targets = (features[:, 0] + 0.5 * rng.randn(n) > 1.3).astype("float32")[:, None]
    num_val = n // 4
    train_features, val_features = features[:-num_val], features[-num_val:]
    train_targets, val_targets = targets[:-num_val], targets[-num_val:]
    counts = np.bincount(train_targets[:, 0].astype("int64"))
    weight_for_0, weight_for_1 = 1.0 / counts[0], 1.0 / counts[1]

    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = keras.Sequential([
            keras.Input(shape=train_features.shape[1:]),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dropout(0.0),
            keras.layers.Dense(1, activation="sigmoid"),
        ])
        metrics = [keras.metrics.FalseNegatives(name="fn"), keras.metrics.FalsePositives(name="fp"),
                   keras.metrics.TrueNegatives(name="tn"), keras.metrics.TruePositives(name="tp"),
                   keras.metrics.Precision(name="precision"), keras.metrics.Recall(name="recall")]
        model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="binary_crossentropy", metrics=metrics)
    callbacks = [keras.callbacks.ModelCheckpoint(os.path.join(workdir, "fraud_model_at_epoch_{epoch}.keras"))]
    class_weight = {0: weight_for_0, 1: weight_for_1}
    history = model.fit(train_features, train_targets, batch_size=32, epochs=2, verbose=0, callbacks=callbacks,
                        validation_data=(val_features, val_targets), class_weight=class_weight)
    assert os.path.exists(os.path.join(workdir, "fraud_model_at_epoch_2.keras"))
    return {"_model": model, "history": history.history}
