"""keras.io/examples/generative/vae: a ``Sampling`` layer drawing ``keras.random.normal`` from its own
``SeedGenerator``, a convolutional encoder and decoder, and a ``VAE`` model with its own ``train_step`` and
three loss trackers (a ``metrics`` property). keras.io's step uses ``tf.GradientTape``; here it is the torch
backend's form of the same step, as keras.io's guide "Customizing what happens in fit() with PyTorch" writes it
(``zero_grad``, ``backward``, ``optimizer.apply`` under ``torch.no_grad``); and a ``call`` (Keras on torch
refuses to fit a subclassed model it cannot build by calling it: "Unable to automatically build the model").

Shrunk: 8x8 synthetic "digits" (32 images), 4/8 filters, Dense(8), latent_dim 2, 2 epochs of batch 8.
"""

import numpy as np
import torch

SOURCE = "https://keras.io/examples/generative/vae/"


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops

    class Sampling(layers.Layer):
        """Uses (z_mean, z_log_var) to sample z, the vector encoding a digit."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.seed_generator = keras.random.SeedGenerator(1337)

        def call(self, inputs):
            z_mean, z_log_var = inputs
            batch = ops.shape(z_mean)[0]
            dim = ops.shape(z_mean)[1]
            epsilon = keras.random.normal(shape=(batch, dim), seed=self.seed_generator)
            return z_mean + ops.exp(0.5 * z_log_var) * epsilon

    class VAE(keras.Model):
        def __init__(self, encoder, decoder, **kwargs):
            super().__init__(**kwargs)
            self.encoder = encoder
            self.decoder = decoder
            self.total_loss_tracker = keras.metrics.Mean(name="total_loss")
            self.reconstruction_loss_tracker = keras.metrics.Mean(name="reconstruction_loss")
            self.kl_loss_tracker = keras.metrics.Mean(name="kl_loss")

        def call(self, inputs):   # added: Keras on torch builds a subclassed model by calling it before fit
            return self.decoder(self.encoder(inputs)[2])

        @property
        def metrics(self):
            return [self.total_loss_tracker, self.reconstruction_loss_tracker, self.kl_loss_tracker]

        def train_step(self, data):
            self.zero_grad()
            z_mean, z_log_var, z = self.encoder(data)
            reconstruction = self.decoder(z)
            reconstruction_loss = ops.mean(
                ops.sum(keras.losses.binary_crossentropy(data, reconstruction), axis=(1, 2)))
            kl_loss = -0.5 * (1 + z_log_var - ops.square(z_mean) - ops.exp(z_log_var))
            kl_loss = ops.mean(ops.sum(kl_loss, axis=1))
            total_loss = reconstruction_loss + kl_loss
            total_loss.backward()
            trainable_weights = [v for v in self.trainable_weights]
            gradients = [v.value.grad for v in trainable_weights]
            with torch.no_grad():
                self.optimizer.apply(gradients, trainable_weights)
            self.total_loss_tracker.update_state(total_loss)
            self.reconstruction_loss_tracker.update_state(reconstruction_loss)
            self.kl_loss_tracker.update_state(kl_loss)
            return {"loss": self.total_loss_tracker.result(),
                    "reconstruction_loss": self.reconstruction_loss_tracker.result(),
                    "kl_loss": self.kl_loss_tracker.result()}

    latent_dim = 2
    rng = np.random.RandomState(0)
    mnist_digits = rng.rand(32 * scale, 8, 8, 1).astype("float32")
    keras.utils.set_random_seed(0)
    with strategy.scope():
        encoder_inputs = keras.Input(shape=(8, 8, 1))
        x = layers.Conv2D(4, 3, activation="relu", strides=2, padding="same")(encoder_inputs)
        x = layers.Conv2D(8, 3, activation="relu", strides=2, padding="same")(x)
        x = layers.Flatten()(x)
        x = layers.Dense(8, activation="relu")(x)
        z_mean = layers.Dense(latent_dim, name="z_mean")(x)
        z_log_var = layers.Dense(latent_dim, name="z_log_var")(x)
        z = Sampling()([z_mean, z_log_var])
        encoder = keras.Model(encoder_inputs, [z_mean, z_log_var, z], name="encoder")

        latent_inputs = keras.Input(shape=(latent_dim,))
        x = layers.Dense(2 * 2 * 8, activation="relu")(latent_inputs)
        x = layers.Reshape((2, 2, 8))(x)
        x = layers.Conv2DTranspose(8, 3, activation="relu", strides=2, padding="same")(x)
        x = layers.Conv2DTranspose(4, 3, activation="relu", strides=2, padding="same")(x)
        decoder_outputs = layers.Conv2DTranspose(1, 3, activation="sigmoid", padding="same")(x)
        decoder = keras.Model(latent_inputs, decoder_outputs, name="decoder")

        vae = VAE(encoder, decoder)
        vae.compile(optimizer=keras.optimizers.Adam())
    history = vae.fit(mnist_digits, epochs=2, batch_size=8, verbose=0)
    z_mean, _, _ = vae.encoder.predict(mnist_digits[:4], verbose=0)
    return {"_model": vae, "history": history.history, "z_mean": z_mean,
            "decoded": vae.decoder.predict(z_mean, verbose=0)}
