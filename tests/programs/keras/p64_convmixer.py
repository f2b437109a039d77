"""keras.io/examples/vision/convmixer as printed (Keras 3): ``activation_block`` (``Activation("gelu")`` then
``BatchNormalization``), a patch ``conv_stem`` (Conv2D with ``strides=patch_size``), ``conv_mixer_block``
(``DepthwiseConv2D(padding="same")`` with a residual ``Add``, then a pointwise Conv2D), ``GlobalAvgPool2D`` (the
alias), ``AdamW``, a best-only full-model ``.keras`` checkpoint reloaded with ``load_weights``, and the example's
visualisation code reading the stem's kernel (``layers[2].get_weights()[0]``) and the depthwise kernels found
with ``isinstance(layer, layers.DepthwiseConv2D)`` and ``get_config()["kernel_size"]``.

The example augments with ``tf.data`` (``RandomCrop``/``RandomFlip`` in a ``map``): arrays here. Its
BatchNormalization normalises each replica's half of the batch, as on TensorFlow's MirroredStrategy. Shrunk:
8x8 RGB images of 10 classes (32x32), 16 filters (256), depth 2 (8), kernel 3 (5), patch 2, 64 training and 16
test images, batch 16, 2 epochs.
"""

import os

import numpy as np

SOURCE = "https://keras.io/examples/vision/convmixer/"


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    learning_rate, weight_decay, batch_size, num_epochs, image_size = 0.001, 0.0001, 16, 2, 8

    def activation_block(x):
        x = layers.Activation("gelu")(x)
        return layers.BatchNormalization()(x)

    def conv_stem(x, filters: int, patch_size: int):
        x = layers.Conv2D(filters, kernel_size=patch_size, strides=patch_size)(x)
        return activation_block(x)

    def conv_mixer_block(x, filters: int, kernel_size: int):
        x0 = x
        x = layers.DepthwiseConv2D(kernel_size=kernel_size, padding="same")(x)
        x = layers.Add()([activation_block(x), x0])
        x = layers.Conv2D(filters, kernel_size=1)(x)
        x = activation_block(x)
        return x

    def get_conv_mixer_256_8(image_size=32, filters=256, depth=8, kernel_size=5, patch_size=2, num_classes=10):
        inputs = keras.Input((image_size, image_size, 3))
        x = layers.Rescaling(scale=1.0 / 255)(inputs)
        x = conv_stem(x, filters, patch_size)
        for _ in range(depth):
            x = conv_mixer_block(x, filters, kernel_size)
        x = layers.GlobalAvgPool2D()(x)
        outputs = layers.Dense(num_classes, activation="softmax")(x)
        return keras.Model(inputs, outputs)

    def run_experiment(model):
        optimizer = keras.optimizers.AdamW(learning_rate=learning_rate, weight_decay=weight_decay)
        model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        checkpoint_filepath = os.path.join(workdir, "checkpoint.keras")
        checkpoint_callback = keras.callbacks.ModelCheckpoint(checkpoint_filepath, monitor="val_accuracy",
                                                              save_best_only=True, save_weights_only=False)
        history = model.fit(x_train, y_train, batch_size=batch_size, validation_data=(x_val, y_val),
                            epochs=num_epochs, callbacks=[checkpoint_callback], verbose=0)
        model.load_weights(checkpoint_filepath)
        _, accuracy = model.evaluate(x_test, y_test, verbose=0)
        return history, model, accuracy

    rng = np.random.RandomState(0)
    labels = rng.randint(0, 10, (96 * scale, 1))
    x = (rng.rand(96 * scale, image_size, image_size, 3) * 128 + labels[:, :, None, None] * 12).astype("float32")
    x_train, y_train = x[:64 * scale], labels[:64 * scale]
    x_val, y_val, x_test, y_test = x[64 * scale:80 * scale], labels[64 * scale:80 * scale], x[-16:], labels[-16:]
    keras.utils.set_random_seed(0)
    with strategy.scope():
        conv_mixer_model = get_conv_mixer_256_8(image_size=image_size, filters=16, depth=2, kernel_size=3)
        history, conv_mixer_model, accuracy = run_experiment(conv_mixer_model)

    patch_embeddings = conv_mixer_model.layers[2].get_weights()[0]
    depthwise = []
    for i, layer in enumerate(conv_mixer_model.layers):
        if isinstance(layer, layers.DepthwiseConv2D):
            if layer.get_config()["kernel_size"] == (3, 3):
                depthwise.append(layer.get_weights()[0])
    return {"_model": conv_mixer_model, "history": history.history, "accuracy": accuracy,
            "predict": conv_mixer_model.predict(x_test, verbose=0), "patch_embeddings": patch_embeddings,
            "depthwise": depthwise}
