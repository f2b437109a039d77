"""keras.io/examples/vision/edsr as printed (``tf.GradientTape`` -> ``md.GradientTape``, ``tf.nn.depth_to_space`` ->
``ops.depth_to_space``, ``tf.image.psnr`` -> the same per-image PSNR written with ``keras.ops``): an ``EDSRModel(
keras.Model)`` of a functional graph whose ``train_step`` takes ``self.compute_loss(y=y, y_pred=y_pred)``, walks
``self.metrics`` updating the one named "loss" with the loss and the others with ``(y, y_pred)``, and returns
``{m.name: m.result() for m in self.metrics}``; a ``predict_step`` of one image (``expand_dims``, ``clip``,
``round``, ``uint8``, ``squeeze``) called directly as the example does; ``Rescaling`` in and out, residual blocks
(``layers.Add()``), ``Lambda(depth_to_space)`` upsampling, ``Input(shape=(None, None, 3))``; ``loss="mae"``, a
plain function metric ``PSNR`` returning the PSNR of the FIRST image of the batch (``tf.image.psnr(...)[0]``),
Adam on a ``PiecewiseConstantDecay``, ``fit(..., steps_per_epoch=...)`` on a repeated dataset.

DIV2K is made up: smooth 24x24 RGB images (random 96x96 crops of 2K images) and their 2x2-averaged 12x12 ... 6x6
low-resolution inputs (x4: bicubic). Shrunk: 8 filters (64), 2 residual blocks (16), batch 8 (16), 2 epochs of 4
steps (100 of 200), boundaries [6] ([5000]).
"""

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/vision/edsr/"
hr_size, scale_factor, batch_size, num_filters = 24, 4, 8, 8


def images(rng, n):
    grid = np.linspace(0, 1, hr_size)
    yy, xx = np.meshgrid(grid, grid, indexing="ij")
    out = []
    for _ in range(n):
        f = rng.uniform(1, 4, 3)
        phase = rng.uniform(0, 6, 3)
        img = np.stack([127 + 120 * np.sin(f[c] * (xx + yy * (c + 1)) * 3 + phase[c]) for c in range(3)], -1)
        out.append(img)
    hr = np.asarray(out, "float32")
    lr = hr.reshape(n, hr_size // scale_factor, scale_factor, hr_size // scale_factor, scale_factor, 3).mean((2, 4))
    return np.round(lr).astype("float32"), hr


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops
    rng = np.random.RandomState(0)
    train_lr, train_hr = images(rng, 32 * scale)
    val_lr, val_hr = images(rng, 8)
    train_ds = md.data.Dataset.from_tensor_slices((train_lr, train_hr)).shuffle(64, seed=0).batch(batch_size).repeat()
    val_ds = md.data.Dataset.from_tensor_slices((val_lr, val_hr)).batch(batch_size)

    class EDSRModel(keras.Model):
        def train_step(self, data):
            x, y = data
            with md.GradientTape() as tape:
                y_pred = self(x, training=True)
                loss = self.compute_loss(y=y, y_pred=y_pred)
            trainable_vars = self.trainable_variables
            gradients = tape.gradient(loss, trainable_vars)
            self.optimizer.apply_gradients(zip(gradients, trainable_vars))
            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
                else:
                    metric.update_state(y, y_pred)
            return {m.name: m.result() for m in self.metrics}

        def predict_step(self, x):
            x = ops.cast(ops.expand_dims(x, axis=0), dtype="float32")
            super_resolution_img = self(x, training=False)
            super_resolution_img = ops.clip(super_resolution_img, 0, 255)
            super_resolution_img = ops.round(super_resolution_img)
            super_resolution_img = ops.squeeze(ops.cast(super_resolution_img, dtype="uint8"), axis=0)
            return super_resolution_img

    def ResBlock(inputs):
        x = layers.Conv2D(num_filters, 3, padding="same", activation="relu")(inputs)
        x = layers.Conv2D(num_filters, 3, padding="same")(x)
        x = layers.Add()([inputs, x])
        return x

    def Upsampling(inputs, factor=2, **kwargs):
        x = layers.Conv2D(num_filters * (factor**2), 3, padding="same", **kwargs)(inputs)
        x = layers.Lambda(lambda x: ops.depth_to_space(x, block_size=factor))(x)
        x = layers.Conv2D(num_filters * (factor**2), 3, padding="same", **kwargs)(x)
        x = layers.Lambda(lambda x: ops.depth_to_space(x, block_size=factor))(x)
        return x

    def make_model(num_filters, num_of_residual_blocks):
        input_layer = layers.Input(shape=(None, None, 3))
        x = layers.Rescaling(scale=1.0 / 255)(input_layer)
        x = x_new = layers.Conv2D(num_filters, 3, padding="same")(x)
        for _ in range(num_of_residual_blocks):
            x_new = ResBlock(x_new)
        x_new = layers.Conv2D(num_filters, 3, padding="same")(x_new)
        x = layers.Add()([x, x_new])
        x = Upsampling(x)
        x = layers.Conv2D(3, 3, padding="same")(x)
        output_layer = layers.Rescaling(scale=255)(x)
        return EDSRModel(input_layer, output_layer)

    def PSNR(super_resolution, high_resolution):
        mse = ops.mean(ops.square(ops.cast(high_resolution, "float32") - ops.cast(super_resolution, "float32")),
                       axis=(1, 2, 3))   # tf.image.psnr: one value per image
        psnr_value = (20 * ops.log(255.0) / ops.log(10.0) - 10 * ops.log(mse) / ops.log(10.0))[0]
        return psnr_value

    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = make_model(num_filters=num_filters, num_of_residual_blocks=2)
        optim_edsr = keras.optimizers.Adam(
            learning_rate=keras.optimizers.schedules.PiecewiseConstantDecay(boundaries=[6], values=[1e-3, 5e-4]))
        model.compile(optimizer=optim_edsr, loss="mae", metrics=[PSNR])
    history = model.fit(train_ds, epochs=2, steps_per_epoch=4 * scale, validation_data=val_ds, verbose=0)
    preds = model.predict_step(val_lr[0])
    return {"_model": model, "history": history.history, "predict_step": keras.ops.convert_to_numpy(preds),
            "evaluate": model.evaluate(val_ds, verbose=0, return_dict=True)}
