"""keras.io/guides/transfer_learning: a frozen base model (``trainable = False``, called with
``training=False``), a new head trained, then the whole model fine-tuned at a low learning rate.

Shrunk: the "pretrained" base is a small convnet (seeded, not downloaded) on 16x16x3 images, 64 examples,
1 epoch per phase; Dropout rate 0.
"""

import numpy as np

SOURCE = "https://keras.io/guides/transfer_learning/"


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    rng = np.random.RandomState(0)
    x = rng.rand(64 * scale, 16, 16, 3).astype("float32")
    y = rng.randint(0, 2, (64 * scale, 1)).astype("float32")
    keras.utils.set_random_seed(0)
    with strategy.scope():
        base_inputs = keras.Input(shape=(16, 16, 3))
        h = layers.Conv2D(8, 3, activation="relu")(base_inputs)
        h = layers.BatchNormalization()(h)
        base_model = keras.Model(base_inputs, layers.Conv2D(8, 3, activation="relu")(h))
        base_model.trainable = False
        inputs = keras.Input(shape=(16, 16, 3))
        x_ = base_model(inputs, training=False)
        x_ = layers.GlobalAveragePooling2D()(x_)
        x_ = layers.Dropout(0.0)(x_)
        outputs = layers.Dense(1)(x_)
        model = keras.Model(inputs, outputs)
        model.compile(optimizer=keras.optimizers.Adam(), loss=keras.losses.BinaryCrossentropy(from_logits=True),
                      metrics=[keras.metrics.BinaryAccuracy()])
    frozen = [keras.ops.convert_to_numpy(w).copy() for w in base_model.weights]
    head = model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    for before, after in zip(frozen, base_model.weights):
        np.testing.assert_array_equal(before, keras.ops.convert_to_numpy(after))  # the frozen base did not move
    base_model.trainable = True
    with strategy.scope():
        model.compile(optimizer=keras.optimizers.Adam(1e-5), loss=keras.losses.BinaryCrossentropy(from_logits=True),
                      metrics=[keras.metrics.BinaryAccuracy()])
    fine = model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    return {"_model": model, "head": head.history, "fine_tune": fine.history, "predict": model.predict(x[:4], verbose=0)}
