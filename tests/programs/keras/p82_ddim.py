"""keras.io/examples/generative/ddim as printed (Keras 3), typed with ``tf.GradientTape`` -> ``md.GradientTape``: a
``KID(keras.metrics.Metric)`` holding its own ``keras.metrics.Mean`` tracker and an image encoder (``Rescaling``,
``Resizing``, a ``Lambda`` preprocessing, ``GlobalAveragePooling2D``), its ``update_state`` a kernel estimate over
the pairs of the batch; a residual U-Net (``Lambda(sinusoidal_embedding, output_shape=...)`` of a noise-variance
input, ``UpSampling2D(size=image_size)``, ``BatchNormalization(center=False, scale=False)``, swish convolutions,
``AveragePooling2D`` down and bilinear ``UpSampling2D`` up blocks sharing a Python ``skips`` list); a
``DiffusionModel`` whose ``normalizer`` (``layers.Normalization``) is adapted on the training images, whose
``ema_network`` is ``keras.models.clone_model(self.network)``, whose ``compile`` adds the trackers and the KID,
whose ``train_step`` normalises the images, draws the noise and one diffusion time per example with the module's
``batch_size`` in the shapes, takes the gradient of the compiled loss (``keras.losses.mean_absolute_error``, a
function: per example and pixel) and moves the EMA weights with ``assign``; its ``test_step`` denoises, generates
``batch_size`` images by reverse diffusion with the EMA network and updates the KID.

As printed the step's shapes use the GLOBAL ``batch_size`` constant: on 2 replicas each replica's half of the
images meets ``batch_size`` noises, and the broadcast fails (TensorFlow's MirroredStrategy fails the same way);
p83 (``replica_batch=True``) takes the batch from ``ops.shape(images)[0]``. The pretrained InceptionV3 of the KID
encoder is a small untrained conv stack; the flowers dataset is random images. Shrunk: 8x8 images (64), KID
images 8 (75), widths [8, 16] ([32, 64, 96, 128]), block depth 1 (2), embedding dims 8 (32), 32 images, batch 8
(64), 2 epochs, 2 KID diffusion steps (5), ema 0.9 (0.999).
"""

import math

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/generative/ddim/"
image_size, kid_image_size, kid_diffusion_steps = 8, 8, 2
min_signal_rate, max_signal_rate = 0.02, 0.95
embedding_dims, embedding_max_frequency = 8, 1000.0
widths, block_depth = [8, 16], 1
batch_size, ema, learning_rate, weight_decay = 8, 0.9, 1e-3, 1e-4


def run(keras, strategy, workdir, scale=1, replica_batch=False):
    layers, ops = keras.layers, keras.ops

    def batch_of(images):   # p83: the replica's batch; as printed: the module's global constant
        return ops.shape(images)[0] if replica_batch else batch_size

    class KID(keras.metrics.Metric):
        def __init__(self, name, **kwargs):
            super().__init__(name=name, **kwargs)
            # KID is estimated per batch and is averaged across batches
            self.kid_tracker = keras.metrics.Mean(name="kid_tracker")
            self.encoder = keras.Sequential([
                keras.Input(shape=(image_size, image_size, 3)),
                layers.Rescaling(255.0),
                layers.Resizing(height=kid_image_size, width=kid_image_size),
                layers.Lambda(lambda x: x / 127.5 - 1.0),   # inception_v3.preprocess_input
                layers.Conv2D(8, 3, activation="relu"),      # InceptionV3(include_top=False)
                layers.GlobalAveragePooling2D(),
            ], name="inception_encoder")

        def polynomial_kernel(self, features_1, features_2):
            feature_dimensions = ops.cast(ops.shape(features_1)[1], dtype="float32")
            return (features_1 @ ops.transpose(features_2) / feature_dimensions + 1.0) ** 3.0

        def update_state(self, real_images, generated_images, sample_weight=None):
            real_features = self.encoder(real_images, training=False)
            generated_features = self.encoder(generated_images, training=False)
            kernel_real = self.polynomial_kernel(real_features, real_features)
            kernel_generated = self.polynomial_kernel(generated_features, generated_features)
            kernel_cross = self.polynomial_kernel(real_features, generated_features)
            batch_size = real_features.shape[0]
            batch_size_f = ops.cast(batch_size, dtype="float32")
            mean_kernel_real = ops.sum(kernel_real * (1.0 - ops.eye(batch_size))) / (
                batch_size_f * (batch_size_f - 1.0))
            mean_kernel_generated = ops.sum(kernel_generated * (1.0 - ops.eye(batch_size))) / (
                batch_size_f * (batch_size_f - 1.0))
            mean_kernel_cross = ops.mean(kernel_cross)
            kid = mean_kernel_real + mean_kernel_generated - 2.0 * mean_kernel_cross
            self.kid_tracker.update_state(kid)

        def result(self):
            return self.kid_tracker.result()

        def reset_state(self):
            self.kid_tracker.reset_state()

    @keras.saving.register_keras_serializable()
    def sinusoidal_embedding(x):
        embedding_min_frequency = 1.0
        frequencies = ops.exp(ops.linspace(ops.log(embedding_min_frequency), ops.log(embedding_max_frequency),
                                           embedding_dims // 2))
        angular_speeds = ops.cast(2.0 * math.pi * frequencies, "float32")
        embeddings = ops.concatenate([ops.sin(angular_speeds * x), ops.cos(angular_speeds * x)], axis=3)
        return embeddings

    def ResidualBlock(width):
        def apply(x):
            input_width = x.shape[3]
            if input_width == width:
                residual = x
            else:
                residual = layers.Conv2D(width, kernel_size=1)(x)
            x = layers.BatchNormalization(center=False, scale=False)(x)
            x = layers.Conv2D(width, kernel_size=3, padding="same", activation="swish")(x)
            x = layers.Conv2D(width, kernel_size=3, padding="same")(x)
            x = layers.Add()([x, residual])
            return x
        return apply

    def DownBlock(width, block_depth):
        def apply(x):
            x, skips = x
            for _ in range(block_depth):
                x = ResidualBlock(width)(x)
                skips.append(x)
            x = layers.AveragePooling2D(pool_size=2)(x)
            return x
        return apply

    def UpBlock(width, block_depth):
        def apply(x):
            x, skips = x
            x = layers.UpSampling2D(size=2, interpolation="bilinear")(x)
            for _ in range(block_depth):
                x = layers.Concatenate()([x, skips.pop()])
                x = ResidualBlock(width)(x)
            return x
        return apply

    def get_network(image_size, widths, block_depth):
        noisy_images = keras.Input(shape=(image_size, image_size, 3))
        noise_variances = keras.Input(shape=(1, 1, 1))
        e = layers.Lambda(sinusoidal_embedding, output_shape=(1, 1, embedding_dims))(noise_variances)
        e = layers.UpSampling2D(size=image_size, interpolation="nearest")(e)
        x = layers.Conv2D(widths[0], kernel_size=1)(noisy_images)
        x = layers.Concatenate()([x, e])
        skips = []
        for width in widths[:-1]:
            x = DownBlock(width, block_depth)([x, skips])
        for _ in range(block_depth):
            x = ResidualBlock(widths[-1])(x)
        for width in reversed(widths[:-1]):
            x = UpBlock(width, block_depth)([x, skips])
        x = layers.Conv2D(3, kernel_size=1, kernel_initializer="zeros")(x)
        return keras.Model([noisy_images, noise_variances], x, name="residual_unet")

    class DiffusionModel(keras.Model):
        def __init__(self, image_size, widths, block_depth):
            super().__init__()
            self.normalizer = layers.Normalization()
            self.network = get_network(image_size, widths, block_depth)
            self.ema_network = keras.models.clone_model(self.network)

        def compile(self, **kwargs):
            super().compile(**kwargs)
            self.noise_loss_tracker = keras.metrics.Mean(name="n_loss")
            self.image_loss_tracker = keras.metrics.Mean(name="i_loss")
            self.kid = KID(name="kid")

        @property
        def metrics(self):
            return [self.noise_loss_tracker, self.image_loss_tracker, self.kid]

        def denormalize(self, images):
            images = self.normalizer.mean + images * self.normalizer.variance**0.5
            return ops.clip(images, 0.0, 1.0)

        def diffusion_schedule(self, diffusion_times):
            start_angle = ops.cast(ops.arccos(max_signal_rate), "float32")
            end_angle = ops.cast(ops.arccos(min_signal_rate), "float32")
            diffusion_angles = start_angle + diffusion_times * (end_angle - start_angle)
            signal_rates = ops.cos(diffusion_angles)
            noise_rates = ops.sin(diffusion_angles)
            return noise_rates, signal_rates

        def denoise(self, noisy_images, noise_rates, signal_rates, training):
            network = self.network if training else self.ema_network
            pred_noises = network([noisy_images, noise_rates**2], training=training)
            pred_images = (noisy_images - noise_rates * pred_noises) / signal_rates
            return pred_noises, pred_images

        def reverse_diffusion(self, initial_noise, diffusion_steps):
            num_images = initial_noise.shape[0]
            step_size = 1.0 / diffusion_steps
            next_noisy_images = initial_noise
            for step in range(diffusion_steps):
                noisy_images = next_noisy_images
                diffusion_times = ops.ones((num_images, 1, 1, 1)) - step * step_size
                noise_rates, signal_rates = self.diffusion_schedule(diffusion_times)
                pred_noises, pred_images = self.denoise(noisy_images, noise_rates, signal_rates, training=False)
                next_diffusion_times = diffusion_times - step_size
                next_noise_rates, next_signal_rates = self.diffusion_schedule(next_diffusion_times)
                next_noisy_images = next_signal_rates * pred_images + next_noise_rates * pred_noises
            return pred_images

        def generate(self, num_images, diffusion_steps):
            initial_noise = keras.random.normal(shape=(num_images, image_size, image_size, 3))
            generated_images = self.reverse_diffusion(initial_noise, diffusion_steps)
            return self.denormalize(generated_images)

        def train_step(self, images):
            images = self.normalizer(images, training=True)
            noises = keras.random.normal(shape=(batch_of(images), image_size, image_size, 3))
            diffusion_times = keras.random.uniform(minval=0.0, maxval=1.0, shape=(batch_of(images), 1, 1, 1))
            noise_rates, signal_rates = self.diffusion_schedule(diffusion_times)
            noisy_images = signal_rates * images + noise_rates * noises
            with md.GradientTape() as tape:
                pred_noises, pred_images = self.denoise(noisy_images, noise_rates, signal_rates, training=True)
                noise_loss = self.loss(noises, pred_noises)  # used for training
                image_loss = self.loss(images, pred_images)  # only used as metric
            gradients = tape.gradient(noise_loss, self.network.trainable_weights)
            self.optimizer.apply_gradients(zip(gradients, self.network.trainable_weights))
            self.noise_loss_tracker.update_state(noise_loss)
            self.image_loss_tracker.update_state(image_loss)
            for weight, ema_weight in zip(self.network.weights, self.ema_network.weights):
                ema_weight.assign(ema * ema_weight + (1 - ema) * weight)
            return {m.name: m.result() for m in self.metrics[:-1]}

        def test_step(self, images):
            images = self.normalizer(images, training=False)
            noises = keras.random.normal(shape=(batch_of(images), image_size, image_size, 3))
            diffusion_times = keras.random.uniform(minval=0.0, maxval=1.0, shape=(batch_of(images), 1, 1, 1))
            noise_rates, signal_rates = self.diffusion_schedule(diffusion_times)
            noisy_images = signal_rates * images + noise_rates * noises
            pred_noises, pred_images = self.denoise(noisy_images, noise_rates, signal_rates, training=False)
            noise_loss = self.loss(noises, pred_noises)
            image_loss = self.loss(images, pred_images)
            self.image_loss_tracker.update_state(image_loss)
            self.noise_loss_tracker.update_state(noise_loss)
            images = self.denormalize(images)
            generated_images = self.generate(num_images=batch_of(images), diffusion_steps=kid_diffusion_steps)
            self.kid.update_state(images, generated_images)
            return {m.name: m.result() for m in self.metrics}

    rng = np.random.RandomState(0)
    images = rng.rand(32 * scale, image_size, image_size, 3).astype("float32")
    train_dataset = md.data.Dataset.from_tensor_slices(images[:24 * scale]).batch(batch_size, drop_remainder=True)
    val_dataset = md.data.Dataset.from_tensor_slices(images[-8:]).batch(batch_size, drop_remainder=True)
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = DiffusionModel(image_size, widths, block_depth)
        model.compile(optimizer=keras.optimizers.AdamW(learning_rate=learning_rate, weight_decay=weight_decay),
                      loss=keras.losses.mean_absolute_error)
        # calculate mean and variance of training dataset for normalization
        model.normalizer.adapt(train_dataset)
    history = model.fit(train_dataset, epochs=2, validation_data=val_dataset, verbose=0)
    return {"_model": model.network, "history": history.history, "mean": model.normalizer.mean,
            "ema": model.ema_network.predict([images[:4], np.full((4, 1, 1, 1), 0.5, "float32")], verbose=0),
            "network": model.network.predict([images[:4], np.full((4, 1, 1, 1), 0.5, "float32")], verbose=0)}
