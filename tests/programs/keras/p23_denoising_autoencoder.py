"""keras.io/examples/vision/autoencoder: a convolutional autoencoder (Conv2D + MaxPooling2D(padding="same")
encoder, Conv2DTranspose(strides=2) decoder, sigmoid output, binary crossentropy) trained to reconstruct
images, then retrained on noisy images (``np.random.normal`` noise, ``np.clip``) to denoise them; the
``fit(x, x)`` idiom (inputs as targets), ``shuffle=True`` and ``validation_data``.

Shrunk: synthetic 12x12 "digits" in [0, 1] (blurred blobs, not MNIST), 48 training and 16 test images,
8 filters (keras.io: 32), 1 epoch per phase (keras.io: 50 and 100) of batch 16 (keras.io: 128).
"""

import numpy as np

SOURCE = "https://keras.io/examples/vision/autoencoder/"


def _images(rng, n):
    """Blobs in [0, 1], as MNIST's strokes are: mostly 0, some bright pixels."""
    yy, xx = np.mgrid[0:12, 0:12]
    cy, cx = rng.uniform(3, 9, (2, n, 1, 1))
    return np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 6.0).astype("float32")


def preprocess(array):
    """keras.io's: normalized (already in [0, 1] here) and reshaped to (n, 12, 12, 1)."""
    return np.reshape(array.astype("float32"), (len(array), 12, 12, 1))


def noise(array, rng):
    """keras.io's: Gaussian noise of factor 0.4, clipped to [0, 1] (a seeded generator here)."""
    noisy_array = array + 0.4 * rng.normal(loc=0.0, scale=1.0, size=array.shape)
    return np.clip(noisy_array, 0.0, 1.0).astype("float32")


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    rng = np.random.RandomState(0)
    train_data = preprocess(_images(rng, 48 * scale))
    test_data = preprocess(_images(rng, 16))
    noisy_train_data, noisy_test_data = noise(train_data, rng), noise(test_data, rng)

    keras.utils.set_random_seed(0)
    with strategy.scope():
        inputs = layers.Input(shape=(12, 12, 1))
        x = layers.Conv2D(8, (3, 3), activation="relu", padding="same")(inputs)
        x = layers.MaxPooling2D((2, 2), padding="same")(x)
        x = layers.Conv2D(8, (3, 3), activation="relu", padding="same")(x)
        x = layers.MaxPooling2D((2, 2), padding="same")(x)
        x = layers.Conv2DTranspose(8, (3, 3), strides=2, activation="relu", padding="same")(x)
        x = layers.Conv2DTranspose(8, (3, 3), strides=2, activation="relu", padding="same")(x)
        x = layers.Conv2D(1, (3, 3), activation="sigmoid", padding="same")(x)
        autoencoder = keras.Model(inputs, x)
        autoencoder.compile(optimizer="adam", loss="binary_crossentropy")
    plain = autoencoder.fit(x=train_data, y=train_data, epochs=1, batch_size=16, shuffle=True,
                            validation_data=(test_data, test_data), verbose=0)
    reconstructed = autoencoder.predict(test_data[:2], verbose=0)
    denoising = autoencoder.fit(x=noisy_train_data, y=train_data, epochs=1, batch_size=16, shuffle=True,
                                validation_data=(noisy_test_data, test_data), verbose=0)
    return {"_model": autoencoder, "history": plain.history, "denoising_history": denoising.history,
            "reconstructed": reconstructed, "denoised": autoencoder.predict(noisy_test_data[:2], verbose=0)}
