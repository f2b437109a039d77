"""keras.io/examples/vision/super_resolution_sub_pixel as printed (Keras 3 version): ESPCN, four ``Conv2D`` with
``kernel_initializer="orthogonal"`` on ``Input(shape=(None, None, 1))`` and a ``DepthToSpace(layers.Layer)`` whose
``call`` unpacks ``batch, height, width, depth = ops.shape(input)`` and reshapes/transposes (the per-replica batch
in the shape); ``loss=keras.losses.MeanSquaredError()``, ``Adam(0.001)``; an ``ESPCNCallback`` that empties a PSNR
list in ``on_epoch_begin``, appends ``10 * math.log10(1 / logs["loss"])`` in ``on_test_batch_end`` and upscales a
test image with ``model.predict`` of ONE image in ``on_epoch_end``; ``EarlyStopping(monitor="loss")`` and a
``ModelCheckpoint(save_weights_only=True, monitor="loss", mode="min", save_best_only=True)`` whose weights are
loaded back; then ``upscale_image`` of held-out images (``np.expand_dims(y, axis=0)``, ``predict``, ``* 255``,
``clip``).

BSDS500 is made up: smooth 24x24 luminance crops (300x300) and their 3x3 area-averaged 8x8 inputs (upscale factor
3, the example's), made in numpy instead of ``tf.image.rgb_to_yuv``/``resize(method="area")``. Shrunk: filters
16/16/8 (64/64/32), 3 epochs (100), batch 8, 32 training and 8 validation crops.
"""

import math
import os

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/vision/super_resolution_sub_pixel/"
crop_size, upscale_factor, batch_size, epochs = 24, 3, 8, 3
input_size = crop_size // upscale_factor


def crops(rng, n):
    grid = np.linspace(0, 1, crop_size)
    yy, xx = np.meshgrid(grid, grid, indexing="ij")
    hr = np.stack([0.5 + 0.4 * np.sin(rng.uniform(2, 6) * xx + rng.uniform(1, 5) * yy + rng.uniform(0, 6))
                   for _ in range(n)])[..., None].astype("float32")
    lr = hr.reshape(n, input_size, upscale_factor, input_size, upscale_factor, 1).mean((2, 4))
    return lr, hr


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops
    rng = np.random.RandomState(0)
    train_lr, train_hr = crops(rng, 32 * scale)
    valid_lr, valid_hr = crops(rng, 8)
    test_lr, test_hr = crops(rng, 3)
    train_ds = md.data.Dataset.from_tensor_slices((train_lr, train_hr)).batch(batch_size).prefetch(2)
    valid_ds = md.data.Dataset.from_tensor_slices((valid_lr, valid_hr)).batch(batch_size).prefetch(2)

    class DepthToSpace(layers.Layer):
        def __init__(self, block_size):
            super().__init__()
            self.block_size = block_size

        def call(self, input):
            batch, height, width, depth = ops.shape(input)
            depth = depth // (self.block_size**2)
            x = ops.reshape(input, [batch, height, width, self.block_size, self.block_size, depth])
            x = ops.transpose(x, [0, 1, 3, 2, 4, 5])
            x = ops.reshape(x, [batch, height * self.block_size, width * self.block_size, depth])
            return x

    def get_model(upscale_factor=3, channels=1):
        conv_args = {"activation": "relu", "kernel_initializer": "orthogonal", "padding": "same"}
        inputs = keras.Input(shape=(None, None, channels))
        x = layers.Conv2D(16, 5, **conv_args)(inputs)
        x = layers.Conv2D(16, 3, **conv_args)(x)
        x = layers.Conv2D(8, 3, **conv_args)(x)
        x = layers.Conv2D(channels * (upscale_factor**2), 3, **conv_args)(x)
        outputs = DepthToSpace(upscale_factor)(x)
        return keras.Model(inputs, outputs)

    def upscale_image(model, y):
        input = np.expand_dims(y, axis=0)
        out = model.predict(input, verbose=0)
        out_img_y = out[0]
        out_img_y *= 255.0
        return np.clip(out_img_y, 0, 255)

    class ESPCNCallback(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.test_img = test_lr[0]
            self.all_psnr, self.predictions = [], []

        def on_epoch_begin(self, epoch, logs=None):
            self.psnr = []

        def on_epoch_end(self, epoch, logs=None):
            self.all_psnr.append(np.mean(self.psnr))
            if epoch % 2 == 0:
                self.predictions.append(upscale_image(self.model, self.test_img))

        def on_test_batch_end(self, batch, logs=None):
            self.psnr.append(10 * math.log10(1 / logs["loss"]))

    keras.utils.set_random_seed(0)
    early_stopping_callback = keras.callbacks.EarlyStopping(monitor="loss", patience=10)
    checkpoint_filepath = os.path.join(workdir, "checkpoint.weights.h5")
    model_checkpoint_callback = keras.callbacks.ModelCheckpoint(
        filepath=checkpoint_filepath, save_weights_only=True, monitor="loss", mode="min", save_best_only=True)
    espcn = ESPCNCallback()
    with strategy.scope():
        model = get_model(upscale_factor=upscale_factor, channels=1)
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001), loss=keras.losses.MeanSquaredError())
    history = model.fit(train_ds, epochs=epochs, callbacks=[espcn, early_stopping_callback,
                                                            model_checkpoint_callback],
                        validation_data=valid_ds, verbose=0)
    model.load_weights(checkpoint_filepath)
    upscaled = [upscale_image(model, y) for y in test_lr]
    psnr = [10 * math.log10(255.0**2 / np.mean((u / 255.0 * 255 - h * 255) ** 2)) for u, h in zip(upscaled, test_hr)]
    return {"_model": model, "history": history.history, "epoch_psnr": espcn.all_psnr,
            "predictions": espcn.predictions, "upscaled": upscaled, "test_psnr": psnr}
