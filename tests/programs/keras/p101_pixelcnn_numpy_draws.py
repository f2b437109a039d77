"""p100 (keras.io PixelCNN) with the sampling draw read into numpy first (``keras.ops.convert_to_numpy(
keras.random.uniform(probs.shape))``): Keras 3 on torch refuses the example's ``probs - keras.random.uniform(...)``
(numpy on the left), on one device too, so this variant lets Keras 3 on multidev's replicas, whose forward writes the
masked kernel with ``kernel.assign``, be compared with one device."""

import numpy as np

from tests.programs.keras import p100_pixelcnn as p100

SOURCE = p100.SOURCE


def sample(keras, pixel_cnn, pixels):
    batch, rows, cols, channels = pixels.shape
    for row in range(rows):
        for col in range(cols):
            for channel in range(channels):
                probs = pixel_cnn.predict(pixels, verbose=0)[:, row, col, channel]
                draw = keras.ops.convert_to_numpy(keras.random.uniform(probs.shape))
                pixels[:, row, col, channel] = np.ceil(probs - draw)
    return pixels


def run(keras, strategy, workdir, scale=1):
    return p100.run(keras, strategy, workdir, scale, sample=sample)
