"""keras.io/examples/generative/dcgan_overriding_train_step: a ``GAN`` model with its own ``compile(d_optimizer,
g_optimizer, loss_fn)`` (two optimizers, two ``Mean`` trackers), latent vectors from ``keras.random.normal`` with
the model's ``SeedGenerator``, label noise, a discriminator with ``Dropout(0.2)`` and a ``Conv2DTranspose``
generator. keras.io's step uses ``tf.GradientTape``; here it is the torch backend's form from keras.io's guide
"Customizing what happens in fit() with PyTorch" (its GAN: ``zero_grad``, ``backward``, ``optimizer.apply``,
``keras.random.uniform`` label noise, ``self.built = True``). One change: the noisy labels are capped at 1
(torch's binary cross-entropy refuses targets above 1: keras.io's line raises "all elements of target should be
between 0 and 1" on one device with the torch backend).

Shrunk: 8x8 RGB synthetic "faces" (32 images), 4/8 filters, latent_dim 4, 1 epoch of batch 8.
"""

import numpy as np
import torch

SOURCE = "https://keras.io/examples/generative/dcgan_overriding_train_step/"


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops

    class GAN(keras.Model):
        def __init__(self, discriminator, generator, latent_dim):
            super().__init__()
            self.discriminator = discriminator
            self.generator = generator
            self.latent_dim = latent_dim
            self.seed_generator = keras.random.SeedGenerator(1337)
            self.built = True

        def compile(self, d_optimizer, g_optimizer, loss_fn):
            super().compile()
            self.d_optimizer = d_optimizer
            self.g_optimizer = g_optimizer
            self.loss_fn = loss_fn
            self.d_loss_metric = keras.metrics.Mean(name="d_loss")
            self.g_loss_metric = keras.metrics.Mean(name="g_loss")

        @property
        def metrics(self):
            return [self.d_loss_metric, self.g_loss_metric]

        def train_step(self, real_images):
            if isinstance(real_images, (tuple, list)):
                real_images = real_images[0]
            # Sample random points in the latent space
            batch_size = ops.shape(real_images)[0]
            random_latent_vectors = keras.random.normal(shape=(batch_size, self.latent_dim), seed=self.seed_generator)
            # Decode them to fake images
            generated_images = self.generator(random_latent_vectors)
            # Combine them with real images
            combined_images = ops.concatenate([generated_images, real_images], axis=0)
            # Assemble labels discriminating real from fake images
            labels = ops.concatenate([ops.ones((batch_size, 1)), ops.zeros((batch_size, 1))], axis=0)
            # Add random noise to the labels - important trick!
            labels += 0.05 * keras.random.uniform(ops.shape(labels), seed=self.seed_generator)
            labels = ops.minimum(labels, 1.0)   # (the one change: see the module docstring)
            # Train the discriminator
            self.zero_grad()
            predictions = self.discriminator(combined_images)
            d_loss = self.loss_fn(labels, predictions)
            d_loss.backward()
            grads = [v.value.grad for v in self.discriminator.trainable_weights]
            with torch.no_grad():
                self.d_optimizer.apply(grads, self.discriminator.trainable_weights)
            # Sample random points in the latent space
            random_latent_vectors = keras.random.normal(shape=(batch_size, self.latent_dim), seed=self.seed_generator)
            # Assemble labels that say "all real images"
            misleading_labels = ops.zeros((batch_size, 1))
            # Train the generator (note that we should *not* update the weights of the discriminator)!
            self.zero_grad()
            predictions = self.discriminator(self.generator(random_latent_vectors))
            g_loss = self.loss_fn(misleading_labels, predictions)
            g_loss.backward()
            grads = [v.value.grad for v in self.generator.trainable_weights]
            with torch.no_grad():
                self.g_optimizer.apply(grads, self.generator.trainable_weights)
            # Update metrics
            self.d_loss_metric.update_state(d_loss)
            self.g_loss_metric.update_state(g_loss)
            return {"d_loss": self.d_loss_metric.result(), "g_loss": self.g_loss_metric.result()}

    latent_dim = 4
    rng = np.random.RandomState(0)
    dataset = rng.rand(32 * scale, 8, 8, 3).astype("float32")
    keras.utils.set_random_seed(0)
    with strategy.scope():
        discriminator = keras.Sequential([
            keras.Input(shape=(8, 8, 3)),
            layers.Conv2D(4, kernel_size=4, strides=2, padding="same"),
            layers.LeakyReLU(negative_slope=0.2),
            layers.Conv2D(8, kernel_size=4, strides=2, padding="same"),
            layers.LeakyReLU(negative_slope=0.2),
            layers.Flatten(),
            layers.Dropout(0.2),
            layers.Dense(1, activation="sigmoid"),
        ], name="discriminator")
        generator = keras.Sequential([
            keras.Input(shape=(latent_dim,)),
            layers.Dense(2 * 2 * 8),
            layers.Reshape((2, 2, 8)),
            layers.Conv2DTranspose(8, kernel_size=4, strides=2, padding="same"),
            layers.LeakyReLU(negative_slope=0.2),
            layers.Conv2DTranspose(8, kernel_size=4, strides=2, padding="same"),
            layers.LeakyReLU(negative_slope=0.2),
            layers.Conv2D(3, kernel_size=5, padding="same", activation="sigmoid"),
        ], name="generator")
        gan = GAN(discriminator=discriminator, generator=generator, latent_dim=latent_dim)
        gan.compile(d_optimizer=keras.optimizers.Adam(learning_rate=0.0001),
                    g_optimizer=keras.optimizers.Adam(learning_rate=0.0001),
                    loss_fn=keras.losses.BinaryCrossentropy())
    history = gan.fit(dataset, epochs=1, batch_size=8, verbose=0)
    latent = np.random.RandomState(1).randn(4, latent_dim).astype("float32")
    return {"_model": gan, "history": history.history, "generated": gan.generator.predict(latent, verbose=0),
            "judged": gan.discriminator.predict(dataset[:4], verbose=0)}
