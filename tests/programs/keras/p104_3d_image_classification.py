"""keras.io/examples/vision/3D_image_classification as printed (``tf.`` -> ``md.``): volumes augmented in a
``Dataset.map`` by ``tf.numpy_function(scipy_rotate, [volume], tf.float32)`` (``scipy.ndimage.rotate`` by an angle
from Python's global ``random.choice``, clipped to [0, 1] in place), ``tf.expand_dims(volume, axis=3)``,
``shuffle(len(x_train))``, ``batch``, ``prefetch(2)``; a ``Conv3D`` + ``MaxPool3D`` + ``BatchNormalization`` stack,
``GlobalAveragePooling3D``, ``Dense``, ``Dropout(0.3)`` and a sigmoid unit; ``Adam`` on an ``ExponentialDecay(...,
staircase=True)`` schedule, ``loss="binary_crossentropy"``, ``metrics=["acc"]``, ``ModelCheckpoint(
"3d_image_classification.keras", save_best_only=True)`` and ``EarlyStopping(monitor="val_acc", patience=15)``,
``fit(..., shuffle=True)``; then ``load_weights`` of the best ``.keras`` file and ``predict(np.expand_dims(x_val[0],
axis=0))[0]``.

The CT scans are made up: 8x8x4 volumes (128x128x64) with a bright blob for the abnormal class. Shrunk: 4/8 filters
and two conv blocks (64/64/128/256, four), Dense 8 (512), batch 4 (2), 2 epochs (100), 24 training and 8 validation
volumes. The shuffles get seeds so the runs repeat (``random.seed`` for the angles).
"""

import os
import random

import numpy as np
from scipy import ndimage

import multidev as md

SOURCE = "https://keras.io/examples/vision/3D_image_classification/"
width, height, depth, batch_size = 8, 8, 4, 4
NORMALIZATION = "BatchNormalization"   # "Identity": the check that the rest equals one device


def scans(rng, n):
    x = rng.uniform(0, 0.3, (n, width, height, depth)).astype("float32")
    y = rng.randint(0, 2, n).astype("float32")
    for i in np.flatnonzero(y):
        cx, cy = rng.randint(2, 6, 2)
        x[i, cx - 1:cx + 2, cy - 1:cy + 2, :] += 0.6
    return np.clip(x, 0, 1), y


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    norm = getattr(layers, NORMALIZATION)
    rng = np.random.RandomState(0)
    x_train, y_train = scans(rng, 24 * scale)
    x_val, y_val = scans(rng, 8)
    random.seed(0)

    def rotate(volume):
        def scipy_rotate(volume):
            angles = [-20, -10, -5, 5, 10, 20]
            angle = random.choice(angles)
            volume = ndimage.rotate(volume, angle, reshape=False)
            volume[volume < 0] = 0
            volume[volume > 1] = 1
            return volume

        augmented_volume = md.numpy_function(scipy_rotate, [volume], md.float32)
        return augmented_volume

    def train_preprocessing(volume, label):
        volume = rotate(volume)
        volume = md.expand_dims(volume, axis=3)
        return volume, label

    def validation_preprocessing(volume, label):
        volume = md.expand_dims(volume, axis=3)
        return volume, label

    train_loader = md.data.Dataset.from_tensor_slices((x_train, y_train))
    validation_loader = md.data.Dataset.from_tensor_slices((x_val, y_val))
    train_dataset = (train_loader.shuffle(len(x_train), seed=0).map(train_preprocessing).batch(batch_size)
                     .prefetch(2))
    validation_dataset = (validation_loader.shuffle(len(x_val), seed=1).map(validation_preprocessing)
                          .batch(batch_size).prefetch(2))

    def get_model(width=128, height=128, depth=64):
        inputs = keras.Input((width, height, depth, 1))
        x = layers.Conv3D(filters=4, kernel_size=3, activation="relu", padding="same")(inputs)
        x = layers.MaxPool3D(pool_size=2)(x)
        x = norm()(x)
        x = layers.Conv3D(filters=8, kernel_size=3, activation="relu", padding="same")(x)
        x = layers.MaxPool3D(pool_size=2)(x)
        x = norm()(x)
        x = layers.GlobalAveragePooling3D()(x)
        x = layers.Dense(units=8, activation="relu")(x)
        x = layers.Dropout(0.3)(x)
        outputs = layers.Dense(units=1, activation="sigmoid")(x)
        return keras.Model(inputs, outputs, name="3dcnn")

    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = get_model(width=width, height=height, depth=depth)
        initial_learning_rate = 0.0001
        lr_schedule = keras.optimizers.schedules.ExponentialDecay(
            initial_learning_rate, decay_steps=4, decay_rate=0.96, staircase=True)
        model.compile(loss="binary_crossentropy", optimizer=keras.optimizers.Adam(learning_rate=lr_schedule),
                      metrics=["acc"])
    path = os.path.join(workdir, "3d_image_classification.keras")
    checkpoint_cb = keras.callbacks.ModelCheckpoint(path, save_best_only=True)
    early_stopping_cb = keras.callbacks.EarlyStopping(monitor="val_acc", patience=15)
    history = model.fit(train_dataset, validation_data=validation_dataset, epochs=2, shuffle=True, verbose=0,
                        callbacks=[checkpoint_cb, early_stopping_cb])
    model.load_weights(path)
    prediction = model.predict(np.expand_dims(x_val[0], axis=0), verbose=0)[0]
    scores = [1 - prediction[0], prediction[0]]
    return {"_model": model, "history": history.history, "scores": scores}
