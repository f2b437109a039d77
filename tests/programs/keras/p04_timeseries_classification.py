"""keras.io/examples/timeseries/timeseries_classification_from_scratch: Conv1D/BatchNorm/ReLU blocks.

Shrunk: 64 series of length 32, 8 filters, 2 epochs; the callbacks of the example (best-model
checkpoint to ``.keras``, ReduceLROnPlateau, EarlyStopping) and the reload of the best model.
"""

import os

import numpy as np

SOURCE = "https://keras.io/examples/timeseries/timeseries_classification_from_scratch/"


def make_model(keras, input_shape, num_classes):
    layers = keras.layers
    input_layer = keras.layers.Input(input_shape)
    x = input_layer
    for _ in range(3):
        x = layers.Conv1D(filters=8, kernel_size=3, padding="same")(x)
        x = layers.BatchNormalization()(x)
        x = layers.ReLU()(x)
    gap = layers.GlobalAveragePooling1D()(x)
    output_layer = layers.Dense(num_classes, activation="softmax")(gap)
    return keras.Model(inputs=input_layer, outputs=output_layer)


def run(keras, strategy, workdir, scale=1):
    rng = np.random.RandomState(0)
    x_train = rng.randn(64 * scale, 32, 1).astype("float32")
    y_train = rng.randint(0, 2, 64 * scale)
    keras.utils.set_random_seed(0)
    best = os.path.join(workdir, "best_model.keras")
    with strategy.scope():
        model = make_model(keras, input_shape=x_train.shape[1:], num_classes=2)
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                      metrics=["sparse_categorical_accuracy"])
    callbacks = [
        keras.callbacks.ModelCheckpoint(best, save_best_only=True, monitor="val_loss"),
        keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=20, min_lr=0.0001),
        keras.callbacks.EarlyStopping(monitor="val_loss", patience=50, verbose=0),
    ]
    history = model.fit(x_train, y_train, batch_size=16, epochs=2, callbacks=callbacks, validation_split=0.25,
                        verbose=0)
    trained = model
    model = keras.models.load_model(best)
    test_loss, test_acc = model.evaluate(x_train[:16], y_train[:16], verbose=0)
    return {"_model": trained, "history": history.history, "test": [test_loss, test_acc]}
