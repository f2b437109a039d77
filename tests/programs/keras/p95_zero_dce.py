"""keras.io/examples/vision/zero_dce as printed (``tf.GradientTape`` -> ``md.GradientTape``, ``tf.*`` ->
``keras.ops``: ``tf.nn.avg_pool2d`` -> ``ops.average_pool``, ``tf.nn.conv2d`` -> ``ops.conv``): a ``ZeroDCE(keras.Model)``
holding a functional DCE-Net (``Concatenate`` skips, a 24-channel ``tanh`` curve map), its own ``compile(learning_rate,
**kwargs)`` that sets ``self.optimizer`` and five ``Mean`` trackers after ``super().compile(**kwargs)``, a ``metrics``
property; four HAND-WRITTEN losses summed in ``compute_losses`` (an illumination smoothness TV loss divided by the
batch size it sees, a ``SpatialConsistencyLoss(keras.losses.Loss)`` with ``reduction="none"`` and four constant
conv kernels, ``ops.mean``-ed; a colour constancy and an exposure loss), the tape's gradient of
``losses["total_loss"]`` over ``self.dce_model.trainable_weights``; a ``test_step``; ``call`` applying the eight
curves; ``predict`` of a batch.

LOL is made up: 16x16 dark RGB images (random 256x256 crops); no targets, as the example. Shrunk: 8 filters (32),
batch 8 (16), 2 epochs (100), exposure patch 16 (16: one patch per image here), learning rate 1e-3 (1e-4).
"""

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/vision/zero_dce/"
IMAGE_SIZE, BATCH_SIZE, FILTERS = 16, 8, 8


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops
    rng = np.random.RandomState(0)
    train_images = (rng.uniform(0, 0.3, (32 * scale, IMAGE_SIZE, IMAGE_SIZE, 3)) ** 1.5).astype("float32")
    val_images = (rng.uniform(0, 0.3, (8, IMAGE_SIZE, IMAGE_SIZE, 3)) ** 1.5).astype("float32")
    train_dataset = md.data.Dataset.from_tensor_slices(train_images).batch(BATCH_SIZE, drop_remainder=True)
    val_dataset = md.data.Dataset.from_tensor_slices(val_images).batch(BATCH_SIZE, drop_remainder=True)

    def build_dce_net():
        input_img = keras.Input(shape=[None, None, 3])
        conv1 = layers.Conv2D(FILTERS, (3, 3), strides=(1, 1), activation="relu", padding="same")(input_img)
        conv2 = layers.Conv2D(FILTERS, (3, 3), strides=(1, 1), activation="relu", padding="same")(conv1)
        conv3 = layers.Conv2D(FILTERS, (3, 3), strides=(1, 1), activation="relu", padding="same")(conv2)
        conv4 = layers.Conv2D(FILTERS, (3, 3), strides=(1, 1), activation="relu", padding="same")(conv3)
        int_con1 = layers.Concatenate(axis=-1)([conv4, conv3])
        conv5 = layers.Conv2D(FILTERS, (3, 3), strides=(1, 1), activation="relu", padding="same")(int_con1)
        int_con2 = layers.Concatenate(axis=-1)([conv5, conv2])
        conv6 = layers.Conv2D(FILTERS, (3, 3), strides=(1, 1), activation="relu", padding="same")(int_con2)
        int_con3 = layers.Concatenate(axis=-1)([conv6, conv1])
        x_r = layers.Conv2D(24, (3, 3), strides=(1, 1), activation="tanh", padding="same")(int_con3)
        return keras.Model(inputs=input_img, outputs=x_r)

    def color_constancy_loss(x):
        mean_rgb = ops.mean(x, axis=(1, 2), keepdims=True)
        mr, mg, mb = mean_rgb[:, :, :, 0], mean_rgb[:, :, :, 1], mean_rgb[:, :, :, 2]
        d_rg = ops.square(mr - mg)
        d_rb = ops.square(mr - mb)
        d_gb = ops.square(mb - mg)
        return ops.sqrt(ops.square(d_rg) + ops.square(d_rb) + ops.square(d_gb))

    def exposure_loss(x, mean_val=0.6):
        x = ops.mean(x, axis=3, keepdims=True)
        mean = ops.average_pool(x, pool_size=16, strides=16, padding="valid")
        return ops.mean(ops.square(mean - mean_val))

    def illumination_smoothness_loss(x):
        batch_size = ops.shape(x)[0]
        h_x = ops.shape(x)[1]
        w_x = ops.shape(x)[2]
        count_h = (ops.shape(x)[2] - 1) * ops.shape(x)[3]
        count_w = ops.shape(x)[2] * (ops.shape(x)[3] - 1)
        h_tv = ops.sum(ops.square((x[:, 1:, :, :] - x[:, : h_x - 1, :, :])))
        w_tv = ops.sum(ops.square((x[:, :, 1:, :] - x[:, :, : w_x - 1, :])))
        batch_size = ops.cast(batch_size, dtype="float32")
        count_h = ops.cast(count_h, dtype="float32")
        count_w = ops.cast(count_w, dtype="float32")
        return 2 * (h_tv / count_h + w_tv / count_w) / batch_size

    class SpatialConsistencyLoss(keras.losses.Loss):
        def __init__(self, **kwargs):
            super().__init__(reduction="none")
            self.left_kernel = ops.convert_to_tensor([[[[0, 0, 0]], [[-1, 1, 0]], [[0, 0, 0]]]], dtype="float32")
            self.right_kernel = ops.convert_to_tensor([[[[0, 0, 0]], [[0, 1, -1]], [[0, 0, 0]]]], dtype="float32")
            self.up_kernel = ops.convert_to_tensor([[[[0, -1, 0]], [[0, 1, 0]], [[0, 0, 0]]]], dtype="float32")
            self.down_kernel = ops.convert_to_tensor([[[[0, 0, 0]], [[0, 1, 0]], [[0, -1, 0]]]], dtype="float32")

        def call(self, y_true, y_pred):
            original_mean = ops.mean(y_true, 3, keepdims=True)
            enhanced_mean = ops.mean(y_pred, 3, keepdims=True)
            original_pool = ops.average_pool(original_mean, pool_size=4, strides=4, padding="valid")
            enhanced_pool = ops.average_pool(enhanced_mean, pool_size=4, strides=4, padding="valid")
            d_original_left = ops.conv(original_pool, self.left_kernel, strides=1, padding="same")
            d_original_right = ops.conv(original_pool, self.right_kernel, strides=1, padding="same")
            d_original_up = ops.conv(original_pool, self.up_kernel, strides=1, padding="same")
            d_original_down = ops.conv(original_pool, self.down_kernel, strides=1, padding="same")
            d_enhanced_left = ops.conv(enhanced_pool, self.left_kernel, strides=1, padding="same")
            d_enhanced_right = ops.conv(enhanced_pool, self.right_kernel, strides=1, padding="same")
            d_enhanced_up = ops.conv(enhanced_pool, self.up_kernel, strides=1, padding="same")
            d_enhanced_down = ops.conv(enhanced_pool, self.down_kernel, strides=1, padding="same")
            d_left = ops.square(d_original_left - d_enhanced_left)
            d_right = ops.square(d_original_right - d_enhanced_right)
            d_up = ops.square(d_original_up - d_enhanced_up)
            d_down = ops.square(d_original_down - d_enhanced_down)
            return d_left + d_right + d_up + d_down

    class ZeroDCE(keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.dce_model = build_dce_net()

        def compile(self, learning_rate, **kwargs):
            super().compile(**kwargs)
            self.optimizer = keras.optimizers.Adam(learning_rate=learning_rate)
            self.spatial_constancy_loss = SpatialConsistencyLoss(reduction="none")
            self.total_loss_tracker = keras.metrics.Mean(name="total_loss")
            self.illumination_smoothness_loss_tracker = keras.metrics.Mean(name="illumination_smoothness_loss")
            self.spatial_constancy_loss_tracker = keras.metrics.Mean(name="spatial_constancy_loss")
            self.color_constancy_loss_tracker = keras.metrics.Mean(name="color_constancy_loss")
            self.exposure_loss_tracker = keras.metrics.Mean(name="exposure_loss")

        @property
        def metrics(self):
            return [self.total_loss_tracker, self.illumination_smoothness_loss_tracker,
                    self.spatial_constancy_loss_tracker, self.color_constancy_loss_tracker,
                    self.exposure_loss_tracker]

        def get_enhanced_image(self, data, output):
            r1, r2, r3, r4 = output[:, :, :, :3], output[:, :, :, 3:6], output[:, :, :, 6:9], output[:, :, :, 9:12]
            r5, r6, r7 = output[:, :, :, 12:15], output[:, :, :, 15:18], output[:, :, :, 18:21]
            r8 = output[:, :, :, 21:24]
            x = data + r1 * (ops.square(data) - data)
            x = x + r2 * (ops.square(x) - x)
            x = x + r3 * (ops.square(x) - x)
            enhanced_image = x + r4 * (ops.square(x) - x)
            x = enhanced_image + r5 * (ops.square(enhanced_image) - enhanced_image)
            x = x + r6 * (ops.square(x) - x)
            x = x + r7 * (ops.square(x) - x)
            enhanced_image = x + r8 * (ops.square(x) - x)
            return enhanced_image

        def call(self, data):
            dce_net_output = self.dce_model(data)
            return self.get_enhanced_image(data, dce_net_output)

        def compute_losses(self, data, output):
            enhanced_image = self.get_enhanced_image(data, output)
            loss_illumination = 200 * illumination_smoothness_loss(output)
            loss_spatial_constancy = ops.mean(self.spatial_constancy_loss(enhanced_image, data))
            loss_color_constancy = 5 * ops.mean(color_constancy_loss(enhanced_image))
            loss_exposure = 10 * ops.mean(exposure_loss(enhanced_image))
            total_loss = loss_illumination + loss_spatial_constancy + loss_color_constancy + loss_exposure
            return {"total_loss": total_loss, "illumination_smoothness_loss": loss_illumination,
                    "spatial_constancy_loss": loss_spatial_constancy, "color_constancy_loss": loss_color_constancy,
                    "exposure_loss": loss_exposure}

        def train_step(self, data):
            with md.GradientTape() as tape:
                output = self.dce_model(data)
                losses = self.compute_losses(data, output)
            gradients = tape.gradient(losses["total_loss"], self.dce_model.trainable_weights)
            self.optimizer.apply_gradients(zip(gradients, self.dce_model.trainable_weights))
            self.total_loss_tracker.update_state(losses["total_loss"])
            self.illumination_smoothness_loss_tracker.update_state(losses["illumination_smoothness_loss"])
            self.spatial_constancy_loss_tracker.update_state(losses["spatial_constancy_loss"])
            self.color_constancy_loss_tracker.update_state(losses["color_constancy_loss"])
            self.exposure_loss_tracker.update_state(losses["exposure_loss"])
            return {metric.name: metric.result() for metric in self.metrics}

        def test_step(self, data):
            output = self.dce_model(data)
            losses = self.compute_losses(data, output)
            self.total_loss_tracker.update_state(losses["total_loss"])
            self.illumination_smoothness_loss_tracker.update_state(losses["illumination_smoothness_loss"])
            self.spatial_constancy_loss_tracker.update_state(losses["spatial_constancy_loss"])
            self.color_constancy_loss_tracker.update_state(losses["color_constancy_loss"])
            self.exposure_loss_tracker.update_state(losses["exposure_loss"])
            return {metric.name: metric.result() for metric in self.metrics}

    keras.utils.set_random_seed(0)
    with strategy.scope():
        zero_dce_model = ZeroDCE()
        zero_dce_model.compile(learning_rate=1e-3)
    history = zero_dce_model.fit(train_dataset, validation_data=val_dataset, epochs=2, verbose=0)
    return {"_model": zero_dce_model, "history": history.history,
            "predict": zero_dce_model.predict(val_images[:4], verbose=0),
            "weights": {str(i): np.asarray(w) for i, w in enumerate(zero_dce_model.dce_model.get_weights())}}
