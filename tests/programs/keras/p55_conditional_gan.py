"""keras.io/examples/generative/conditional_gan: a ``ConditionalGAN`` model with its own ``compile(d_optimizer,
g_optimizer, loss_fn)`` (``super().compile()`` with no loss, two Adams), a ``metrics`` property of two ``Mean``
trackers, and a ``train_step`` (``tf.GradientTape`` -> ``md.GradientTape``) that tiles the one-hot labels over
the image (``ops.repeat(..., repeats=[image_size * image_size])`` then a reshape, as printed), draws latent
vectors with ``keras.random.normal(seed=self.seed_generator)``, trains the discriminator on fake and real images
concatenated (2 x the batch) and the generator through the discriminator; then the example's class interpolation
through the trained generator.

Shrunk: 8x8 images of 4 classes (64), latent_dim 8, 8/16 filters, a 2x2 seed upsampled twice, batch 16, 1 epoch.
"""

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/generative/conditional_gan/"


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops
    num_channels, num_classes, image_size, latent_dim = 1, 4, 8, 8
    generator_in_channels = latent_dim + num_classes
    discriminator_in_channels = num_channels + num_classes

    class ConditionalGAN(keras.Model):
        def __init__(self, discriminator, generator, latent_dim):
            super().__init__()
            self.discriminator = discriminator
            self.generator = generator
            self.latent_dim = latent_dim
            self.seed_generator = keras.random.SeedGenerator(1337)
            self.gen_loss_tracker = keras.metrics.Mean(name="generator_loss")
            self.disc_loss_tracker = keras.metrics.Mean(name="discriminator_loss")

        @property
        def metrics(self):
            return [self.gen_loss_tracker, self.disc_loss_tracker]

        def compile(self, d_optimizer, g_optimizer, loss_fn):
            super().compile()
            self.d_optimizer = d_optimizer
            self.g_optimizer = g_optimizer
            self.loss_fn = loss_fn

        def train_step(self, data):
            real_images, one_hot_labels = data
            image_one_hot_labels = one_hot_labels[:, :, None, None]
            image_one_hot_labels = ops.repeat(image_one_hot_labels, repeats=[image_size * image_size])
            image_one_hot_labels = ops.reshape(image_one_hot_labels, (-1, image_size, image_size, num_classes))
            batch_size = ops.shape(real_images)[0]
            random_latent_vectors = keras.random.normal(shape=(batch_size, self.latent_dim), seed=self.seed_generator)
            random_vector_labels = ops.concatenate([random_latent_vectors, one_hot_labels], axis=1)
            generated_images = self.generator(random_vector_labels)
            fake_image_and_labels = ops.concatenate([generated_images, image_one_hot_labels], -1)
            real_image_and_labels = ops.concatenate([real_images, image_one_hot_labels], -1)
            combined_images = ops.concatenate([fake_image_and_labels, real_image_and_labels], axis=0)
            labels = ops.concatenate([ops.ones((batch_size, 1)), ops.zeros((batch_size, 1))], axis=0)
            with md.GradientTape() as tape:
                predictions = self.discriminator(combined_images)
                d_loss = self.loss_fn(labels, predictions)
            grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
            self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))
            random_latent_vectors = keras.random.normal(shape=(batch_size, self.latent_dim), seed=self.seed_generator)
            random_vector_labels = ops.concatenate([random_latent_vectors, one_hot_labels], axis=1)
            misleading_labels = ops.zeros((batch_size, 1))
            with md.GradientTape() as tape:
                fake_images = self.generator(random_vector_labels)
                fake_image_and_labels = ops.concatenate([fake_images, image_one_hot_labels], -1)
                predictions = self.discriminator(fake_image_and_labels)
                g_loss = self.loss_fn(misleading_labels, predictions)
            grads = tape.gradient(g_loss, self.generator.trainable_weights)
            self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights))
            self.gen_loss_tracker.update_state(g_loss)
            self.disc_loss_tracker.update_state(d_loss)
            return {"g_loss": self.gen_loss_tracker.result(), "d_loss": self.disc_loss_tracker.result()}

    rng = np.random.RandomState(0)
    n = 64 * scale
    classes = rng.randint(0, num_classes, n)
    all_digits = (rng.rand(n, image_size, image_size, 1) * 0.3).astype("float32")
    for i, c in enumerate(classes):   # class c: a bright row at 2c
        all_digits[i, 2 * c, :, 0] += 0.7
    all_labels = keras.utils.to_categorical(classes, num_classes).astype("float32")
    keras.utils.set_random_seed(0)
    with strategy.scope():
        discriminator = keras.Sequential([
            keras.layers.InputLayer((image_size, image_size, discriminator_in_channels)),
            layers.Conv2D(8, (3, 3), strides=(2, 2), padding="same"),
            layers.LeakyReLU(negative_slope=0.2),
            layers.Conv2D(16, (3, 3), strides=(2, 2), padding="same"),
            layers.LeakyReLU(negative_slope=0.2),
            layers.GlobalMaxPooling2D(),
            layers.Dense(1),
        ], name="discriminator")
        generator = keras.Sequential([
            keras.layers.InputLayer((generator_in_channels,)),
            layers.Dense(2 * 2 * generator_in_channels),
            layers.LeakyReLU(negative_slope=0.2),
            layers.Reshape((2, 2, generator_in_channels)),
            layers.Conv2DTranspose(16, (4, 4), strides=(2, 2), padding="same"),
            layers.LeakyReLU(negative_slope=0.2),
            layers.Conv2DTranspose(16, (4, 4), strides=(2, 2), padding="same"),
            layers.LeakyReLU(negative_slope=0.2),
            layers.Conv2D(1, (3, 3), padding="same", activation="sigmoid"),
        ], name="generator")
        cond_gan = ConditionalGAN(discriminator=discriminator, generator=generator, latent_dim=latent_dim)
        cond_gan.compile(d_optimizer=keras.optimizers.Adam(learning_rate=0.0003),
                         g_optimizer=keras.optimizers.Adam(learning_rate=0.0003),
                         loss_fn=keras.losses.BinaryCrossentropy(from_logits=True))
    history = cond_gan.fit(all_digits, all_labels, batch_size=16, epochs=1, shuffle=False, verbose=0)

    # The example's interpolation between two classes through the trained generator
    trained_gen = cond_gan.generator
    num_interpolation = 5
    interpolation_noise = keras.random.normal(shape=(1, latent_dim), seed=7)
    interpolation_noise = ops.repeat(interpolation_noise, repeats=num_interpolation)
    interpolation_noise = ops.reshape(interpolation_noise, (num_interpolation, latent_dim))
    first_label = keras.utils.to_categorical([0], num_classes)
    second_label = keras.utils.to_categorical([2], num_classes)
    first_label = ops.cast(first_label, "float32")
    second_label = ops.cast(second_label, "float32")
    percent_second_label = ops.linspace(0, 1, num_interpolation)[:, None]
    percent_second_label = ops.cast(percent_second_label, "float32")
    interpolation_labels = first_label * (1 - percent_second_label) + second_label * percent_second_label
    noise_and_labels = ops.concatenate([interpolation_noise, interpolation_labels], 1)
    fake = trained_gen.predict(noise_and_labels, verbose=0)
    return {"_model": cond_gan, "history": history.history, "fake": fake[:, :4, :4, 0],
            "generator": trained_gen.get_weights()[0], "discriminator": cond_gan.discriminator.get_weights()[-2]}
