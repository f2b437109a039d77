"""keras.io's "Customizing what happens in fit() with TensorFlow": the GAN example (Keras 3 on TensorFlow,
TF 2.21's ``tf.keras``), typed as printed with ``tf.`` -> ``md.``, shrunk, on one device and on a
MirroredStrategy of two (keras_loop_guide.py has the guide's other cells).
"""

from conformance_support import fixed_weights, scope_of, two_cpus, val


def _r(x, digits=5):
    x = val(x)
    if isinstance(x, dict):
        return {k: _r(v, digits) for k, v in x.items()}
    return [_r(v, digits) for v in x] if isinstance(x, list) else round(float(x), digits)


def _fix(model):
    return fixed_weights(model, 0.6)


# The GAN example of "Customizing what happens in fit()" (dense layers on 8-feature "images"; the latent
# vectors are rows of a fixed table and the labels' random noise is left out, so both sides draw alike).
LATENT_DIM = 4
LATENT = [[((i * 3 + j * 5) % 7) / 7.0 - 0.5 for j in range(LATENT_DIM)] for i in range(16)]
IMAGES = [[((i * 5 + j) % 9) / 9.0 for j in range(8)] for i in range(16)]


def _gan(tf, strategy, built=False):
    keras = tf.keras

    class GAN(keras.Model):
        def __init__(self, discriminator, generator, latent_dim):
            super().__init__()
            self.discriminator = discriminator
            self.generator = generator
            self.latent_dim = latent_dim
            self.d_loss_tracker = keras.metrics.Mean(name="d_loss")
            self.g_loss_tracker = keras.metrics.Mean(name="g_loss")

        @property
        def metrics(self):
            return [self.d_loss_tracker, self.g_loss_tracker]

        def compile(self, d_optimizer, g_optimizer, loss_fn):
            super().compile()
            self.d_optimizer = d_optimizer
            self.g_optimizer = g_optimizer
            self.loss_fn = loss_fn

        def train_step(self, real_images):
            if isinstance(real_images, tuple):
                real_images = real_images[0]
            # Sample random points in the latent space
            batch_size = tf.shape(real_images)[0]
            random_latent_vectors = tf.gather(tf.constant(LATENT), tf.range(batch_size))
            # Decode them to fake images
            generated_images = self.generator(random_latent_vectors)
            # Combine them with real images
            combined_images = tf.concat([generated_images, real_images], axis=0)
            # Assemble labels discriminating real from fake images
            labels = tf.concat([tf.ones((batch_size, 1)), tf.zeros((batch_size, 1))], axis=0)
            # Train the discriminator
            with tf.GradientTape() as tape:
                predictions = self.discriminator(combined_images)
                d_loss = self.loss_fn(labels, predictions)
            grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
            self.d_optimizer.apply(grads, self.discriminator.trainable_weights)
            # Sample random points in the latent space
            random_latent_vectors = tf.gather(tf.constant(LATENT), tf.range(batch_size) + 8)
            # Assemble labels that say "all real images"
            misleading_labels = tf.zeros((batch_size, 1))
            # Train the generator (note that we should *not* update the weights
            # of the discriminator)!
            with tf.GradientTape() as tape:
                predictions = self.discriminator(self.generator(random_latent_vectors))
                g_loss = self.loss_fn(misleading_labels, predictions)
            grads = tape.gradient(g_loss, self.generator.trainable_weights)
            self.g_optimizer.apply(grads, self.generator.trainable_weights)
            # Update metrics and return their value.
            self.d_loss_tracker.update_state(d_loss)
            self.g_loss_tracker.update_state(g_loss)
            return {"d_loss": self.d_loss_tracker.result(), "g_loss": self.g_loss_tracker.result()}

    with scope_of(strategy):
        discriminator = _fix(keras.Sequential([keras.Input(shape=(8,)), keras.layers.Dense(6),
                                               keras.layers.LeakyReLU(negative_slope=0.2), keras.layers.Dense(1)],
                                              name="discriminator"))
        generator = _fix(keras.Sequential([keras.Input(shape=(LATENT_DIM,)), keras.layers.Dense(6),
                                           keras.layers.LeakyReLU(negative_slope=0.2),
                                           keras.layers.Dense(8, activation="sigmoid")], name="generator"))
        gan = GAN(discriminator=discriminator, generator=generator, latent_dim=LATENT_DIM)
        gan.compile(d_optimizer=keras.optimizers.Adam(learning_rate=0.03),
                    g_optimizer=keras.optimizers.Adam(learning_rate=0.03),
                    loss_fn=keras.losses.BinaryCrossentropy(from_logits=True))
    if built:   # TF 2.21's workarounds: fit on a strategy builds an unbuilt model by calling it (no call()),
        gan.built = True   # and optimizer slots made inside the step fail (loop_train.slots_made_in_function)
        with scope_of(strategy):
            gan.d_optimizer.build(discriminator.trainable_weights)
            gan.g_optimizer.build(generator.trainable_weights)
    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(IMAGES)).batch(8)
    history = gan.fit(dataset, epochs=2, verbose=0)
    return {"history": {k: _r(v) for k, v in history.history.items()},
            "generator": _r(generator.trainable_weights[-1].numpy(), 4),
            "discriminator": _r(discriminator.trainable_weights[-2].numpy(), 4)}


def case_gan(tf):
    return _gan(tf, None)


def case_gan_two_replicas(tf):
    out = _gan(tf, two_cpus(tf))
    return {"generator": out["generator"], "discriminator": out["discriminator"]}


def case_gan_two_replicas_built(tf):
    out = _gan(tf, two_cpus(tf), built=True)
    return {"generator": out["generator"], "discriminator": out["discriminator"]}


def case_gan_two_replicas_reported_loss(tf):
    return _gan(tf, two_cpus(tf), built=True)["history"]
