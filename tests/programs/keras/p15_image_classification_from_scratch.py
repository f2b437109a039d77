"""keras.io/examples/vision/image_classification_from_scratch: data augmentation inside the model (a
``data_augmentation`` Sequential of ``RandomFlip("horizontal")`` and ``RandomRotation(0.1)``, "option 1"), then
the example's small Xception-like network (``Rescaling``, ``SeparableConv2D`` residual blocks, BatchNormalization).

Shrunk: synthetic 16x16 RGB "cats and dogs" (32 images), block sizes [8, 16] instead of [256, 512, 728], 8/32
filters instead of 128/1024, 1 epoch; Dropout rate 0. The augmentation's draws over the two replicas' halves
are checked by ``tests/integrations/test_keras3_augment.py`` (BatchNormalization makes this whole run differ).
"""

import numpy as np

SOURCE = "https://keras.io/examples/vision/image_classification_from_scratch/"


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    image_size = (16, 16)
    rng = np.random.RandomState(0)
    x = (rng.rand(32 * scale, *image_size, 3) * 255).astype("float32")
    y = rng.randint(0, 2, 32 * scale).astype("float32")

    def make_model(input_shape, num_classes):
        data_augmentation = keras.Sequential([layers.RandomFlip("horizontal"), layers.RandomRotation(0.1)])
        inputs = keras.Input(shape=input_shape)
        x = data_augmentation(inputs)
        x = layers.Rescaling(1.0 / 255)(x)
        x = layers.Conv2D(8, 3, strides=2, padding="same")(x)
        x = layers.BatchNormalization()(x)
        x = layers.Activation("relu")(x)
        previous_block_activation = x  # Set aside residual
        for size in [8, 16]:
            x = layers.Activation("relu")(x)
            x = layers.SeparableConv2D(size, 3, padding="same")(x)
            x = layers.BatchNormalization()(x)
            x = layers.Activation("relu")(x)
            x = layers.SeparableConv2D(size, 3, padding="same")(x)
            x = layers.BatchNormalization()(x)
            x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
            residual = layers.Conv2D(size, 1, strides=2, padding="same")(previous_block_activation)
            x = layers.add([x, residual])  # Add back residual
            previous_block_activation = x  # Set aside next residual
        x = layers.SeparableConv2D(32, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)
        x = layers.Activation("relu")(x)
        x = layers.GlobalAveragePooling2D()(x)
        units = 1 if num_classes == 2 else num_classes
        x = layers.Dropout(0.0)(x)
        outputs = layers.Dense(units, activation=None)(x)
        return keras.Model(inputs, outputs)

    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = make_model(input_shape=image_size + (3,), num_classes=2)
        model.compile(optimizer=keras.optimizers.Adam(3e-4), loss=keras.losses.BinaryCrossentropy(from_logits=True),
                      metrics=[keras.metrics.BinaryAccuracy(name="acc")])
    history = model.fit(x, y, batch_size=16, epochs=1, validation_data=(x[:16], y[:16]), verbose=0)
    predictions = model.predict(x[:4], verbose=0)
    score = keras.ops.convert_to_numpy(keras.ops.sigmoid(predictions[:, 0]))
    return {"_model": model, "history": history.history, "score": score}
