"""keras.io/examples/generative/pixelcnn as printed (Keras 3 version): a ``PixelConvLayer(layers.Layer)`` holding a
``Conv2D(**kwargs)`` whose ``build`` builds the conv and writes a numpy ``self.mask`` (float64) from
``ops.shape(self.conv.kernel)``, and whose ``call`` writes the masked kernel back with
``self.conv.kernel.assign(self.conv.kernel * self.mask)`` before calling the conv (in every replica's forward); a
``ResidualBlock(keras.layers.Layer)`` ending in ``keras.layers.add([inputs, x])``; masks "A" then "B";
``Conv2D(1, activation="sigmoid")``, ``Adam(learning_rate=0.0005)``, ``loss="binary_crossentropy"``,
``fit(x=data, y=data, batch_size=..., validation_split=0.1)``; then the sampling loop: one ``predict`` of the whole
``pixels`` batch per pixel, ``ops.ceil(probs - keras.random.uniform(probs.shape))`` written into the numpy array.

MNIST is made up: 8x8 binarised strokes (``np.where(data < 0.33 * 256, 0, 1)`` of 28x28 digits). Shrunk: 16
filters (128), 2 residual blocks (5), batch 16 (128), 2 epochs (50), 80 images (70000), 4 samples of 8x8.
"""

import numpy as np

SOURCE = "https://keras.io/examples/generative/pixelcnn/"
num_classes, input_shape, n_residual_blocks, filters = 10, (8, 8, 1), 2, 16


def digits(rng, n):
    yy, xx = np.mgrid[0:8, 0:8]
    out = []
    for _ in range(n):
        a, b, c = rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-3, 3)
        stroke = np.abs(a * (xx - 3.5) + b * (yy - 3.5) - c) < 1.2
        out.append(np.where(stroke, 230, 20) + rng.normal(0, 40, (8, 8)))
    return np.clip(np.asarray(out), 0, 255)[..., None]


def masked_leak(model):
    """The largest |kernel| entry outside a PixelConvLayer's mask after training (the step after the last assign)."""
    leak = []
    for layer in model.layers:
        if hasattr(layer, "mask_type"):
            kernel = np.asarray(layer.conv.kernel.numpy() if hasattr(layer.conv.kernel, "numpy")
                                else layer.conv.kernel)
            leak.append(float(np.abs(kernel * (1 - layer.mask)).max()))
    return leak


def run(keras, strategy, workdir, scale=1, sample=None):
    layers, ops = keras.layers, keras.ops

    class PixelConvLayer(layers.Layer):
        def __init__(self, mask_type, **kwargs):
            super().__init__()
            self.mask_type = mask_type
            self.conv = layers.Conv2D(**kwargs)

        def build(self, input_shape):
            self.conv.build(input_shape)
            kernel_shape = ops.shape(self.conv.kernel)
            self.mask = np.zeros(shape=kernel_shape)
            self.mask[: kernel_shape[0] // 2, ...] = 1.0
            self.mask[kernel_shape[0] // 2, : kernel_shape[1] // 2, ...] = 1.0
            if self.mask_type == "B":
                self.mask[kernel_shape[0] // 2, kernel_shape[1] // 2, ...] = 1.0

        def call(self, inputs):
            self.conv.kernel.assign(self.conv.kernel * self.mask)
            return self.conv(inputs)

    class ResidualBlock(keras.layers.Layer):
        def __init__(self, filters, **kwargs):
            super().__init__(**kwargs)
            self.conv1 = keras.layers.Conv2D(filters=filters, kernel_size=1, activation="relu")
            self.pixel_conv = PixelConvLayer(mask_type="B", filters=filters // 2, kernel_size=3, activation="relu",
                                             padding="same")
            self.conv2 = keras.layers.Conv2D(filters=filters, kernel_size=1, activation="relu")

        def call(self, inputs):
            x = self.conv1(inputs)
            x = self.pixel_conv(x)
            x = self.conv2(x)
            return keras.layers.add([inputs, x])

    rng = np.random.RandomState(0)
    data = digits(rng, 80 * scale)
    data = np.where(data < (0.33 * 256), 0, 1)
    data = data.astype(np.float32)

    keras.utils.set_random_seed(0)
    with strategy.scope():
        inputs = keras.Input(shape=input_shape, dtype="float32")
        x = PixelConvLayer(mask_type="A", filters=filters, kernel_size=7, activation="relu", padding="same")(inputs)
        for _ in range(n_residual_blocks):
            x = ResidualBlock(filters=filters)(x)
        for _ in range(2):
            x = PixelConvLayer(mask_type="B", filters=filters, kernel_size=1, strides=1, activation="relu",
                               padding="valid")(x)
        out = keras.layers.Conv2D(filters=1, kernel_size=1, strides=1, activation="sigmoid", padding="valid")(x)
        pixel_cnn = keras.Model(inputs, out)
        adam = keras.optimizers.Adam(learning_rate=0.0005)
        pixel_cnn.compile(optimizer=adam, loss="binary_crossentropy")
    history = pixel_cnn.fit(x=data, y=data, batch_size=16, epochs=2, validation_split=0.1, verbose=0)

    batch = 4
    pixels = np.zeros(shape=(batch,) + (pixel_cnn.input_shape)[1:])
    if sample is not None:   # p101: another sampling line
        pixels = sample(keras, pixel_cnn, pixels)
        return {"_model": pixel_cnn, "history": history.history, "pixels": pixels,
                "masked_leak": masked_leak(pixel_cnn), "probs": pixel_cnn.predict(data[:8], verbose=0)}
    batch, rows, cols, channels = pixels.shape
    for row in range(rows):
        for col in range(cols):
            for channel in range(channels):
                probs = pixel_cnn.predict(pixels, verbose=0)[:, row, col, channel]
                pixels[:, row, col, channel] = ops.ceil(probs - keras.random.uniform(probs.shape))
    return {"_model": pixel_cnn, "history": history.history, "pixels": pixels, "masked_leak": masked_leak(pixel_cnn),
            "probs": pixel_cnn.predict(data[:8], verbose=0)}
