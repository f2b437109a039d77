"""keras.io/examples/generative/wgan_gp: a Wasserstein GAN with gradient penalty. A ``WGAN`` model with its own
``compile(d_optimizer, g_optimizer, d_loss_fn, g_loss_fn)`` and ``train_step``: ``discriminator_extra_steps=3``
critic updates per generator update, each adding ``gp_weight * gradient_penalty`` (the norm of the critic's
gradient with respect to images interpolated between real and fake ones, minus 1, squared), raw losses returned
as the logs. keras.io's step uses ``tf.GradientTape`` twice (the penalty's tape nested in the critic's); here it
is the torch backend's form: the penalty's gradient by ``torch.autograd.grad(..., create_graph=True)`` (a
double backward), ``zero_grad``, ``backward``, ``optimizer.apply`` as keras.io's torch guide writes a step.
The discriminator: ``ZeroPadding2D``, strided ``Conv2D`` blocks with ``LeakyReLU`` and ``Dropout(0.3)``,
``Dropout(0.2)`` before its linear output; the generator: ``Dense`` -> ``Reshape`` -> ``UpSampling2D`` +
``Conv2D`` blocks -> ``tanh`` -> ``Cropping2D``; Adam(0.0002, beta_1=0.5, beta_2=0.9).

Shrunk: 8x8x1 synthetic "Fashion-MNIST" images in [-1, 1] (32), 4/8 filters, latent_dim 4, 1 epoch of batch 8;
the generator's BatchNormalization left out (a training one normalises each replica's half by its own
moments: p04, p15); keras.io's ``tf.random.normal``/``tf.random.uniform`` draws made with
``keras.random`` and the model's ``SeedGenerator``.
"""

import numpy as np
import torch

SOURCE = "https://keras.io/examples/generative/wgan_gp/"


def discriminator_loss(real_img, fake_img, ops):
    return ops.mean(fake_img) - ops.mean(real_img)


def generator_loss(fake_img, ops):
    return -ops.mean(fake_img)


def _models(keras, latent_dim):
    layers = keras.layers
    discriminator = keras.Sequential([
        keras.Input(shape=(8, 8, 1)),
        layers.ZeroPadding2D((2, 2)),
        layers.Conv2D(4, (5, 5), strides=(2, 2), padding="same"),
        layers.LeakyReLU(0.2),
        layers.Conv2D(8, (5, 5), strides=(2, 2), padding="same"),
        layers.LeakyReLU(0.2),
        layers.Dropout(0.3),
        layers.Flatten(),
        layers.Dropout(0.2),
        layers.Dense(1),
    ], name="discriminator")
    generator = keras.Sequential([
        keras.Input(shape=(latent_dim,)),
        layers.Dense(3 * 3 * 8, use_bias=False),
        layers.LeakyReLU(0.2),
        layers.Reshape((3, 3, 8)),
        layers.UpSampling2D((2, 2)),
        layers.Conv2D(4, (3, 3), padding="same", use_bias=False),
        layers.LeakyReLU(0.2),
        layers.UpSampling2D((2, 2)),
        layers.Conv2D(1, (3, 3), padding="same", activation="tanh"),
        layers.Cropping2D((2, 2)),
    ], name="generator")
    return discriminator, generator


def run(keras, strategy, workdir, scale=1):
    ops = keras.ops

    class WGAN(keras.Model):
        def __init__(self, discriminator, generator, latent_dim, discriminator_extra_steps=3, gp_weight=10.0):
            super().__init__()
            self.discriminator = discriminator
            self.generator = generator
            self.latent_dim = latent_dim
            self.d_steps = discriminator_extra_steps
            self.gp_weight = gp_weight
            self.seed_generator = keras.random.SeedGenerator(1337)
            self.built = True

        def compile(self, d_optimizer, g_optimizer, d_loss_fn, g_loss_fn):
            super().compile()
            self.d_optimizer = d_optimizer
            self.g_optimizer = g_optimizer
            self.d_loss_fn = d_loss_fn
            self.g_loss_fn = g_loss_fn

        def gradient_penalty(self, batch_size, real_images, fake_images):
            alpha = keras.random.uniform((batch_size, 1, 1, 1), 0.0, 1.0, seed=self.seed_generator)
            diff = fake_images - real_images
            interpolated = (real_images + alpha * diff).detach().requires_grad_(True)
            pred = self.discriminator(interpolated, training=True)
            grads = torch.autograd.grad(pred, interpolated, grad_outputs=torch.ones_like(pred), create_graph=True)[0]
            norm = ops.sqrt(ops.sum(ops.square(grads), axis=[1, 2, 3]))
            return ops.mean((norm - 1.0) ** 2)

        def train_step(self, real_images):
            if isinstance(real_images, (tuple, list)):
                real_images = real_images[0]
            batch_size = ops.shape(real_images)[0]
            for _ in range(self.d_steps):
                random_latent_vectors = keras.random.normal((batch_size, self.latent_dim), seed=self.seed_generator)
                self.zero_grad()
                fake_images = self.generator(random_latent_vectors, training=True)
                fake_logits = self.discriminator(fake_images, training=True)
                real_logits = self.discriminator(real_images, training=True)
                d_cost = self.d_loss_fn(real_img=real_logits, fake_img=fake_logits)
                gp = self.gradient_penalty(batch_size, real_images, fake_images)
                d_loss = d_cost + gp * self.gp_weight
                d_loss.backward()
                d_gradient = [v.value.grad for v in self.discriminator.trainable_weights]
                with torch.no_grad():
                    self.d_optimizer.apply(d_gradient, self.discriminator.trainable_weights)
            random_latent_vectors = keras.random.normal((batch_size, self.latent_dim), seed=self.seed_generator)
            self.zero_grad()
            generated_images = self.generator(random_latent_vectors, training=True)
            gen_img_logits = self.discriminator(generated_images, training=True)
            g_loss = self.g_loss_fn(gen_img_logits)
            g_loss.backward()
            gen_gradient = [v.value.grad for v in self.generator.trainable_weights]
            with torch.no_grad():
                self.g_optimizer.apply(gen_gradient, self.generator.trainable_weights)
            return {"d_loss": d_loss, "g_loss": g_loss}

    latent_dim = 4
    rng = np.random.RandomState(0)
    train_images = (rng.rand(32 * scale, 8, 8, 1).astype("float32") - 0.5) / 0.5   # keras.io's (x - 127.5) / 127.5
    keras.utils.set_random_seed(0)
    with strategy.scope():
        d_model, g_model = _models(keras, latent_dim)
        wgan = WGAN(discriminator=d_model, generator=g_model, latent_dim=latent_dim, discriminator_extra_steps=3)
        wgan.compile(d_optimizer=keras.optimizers.Adam(learning_rate=0.0002, beta_1=0.5, beta_2=0.9),
                     g_optimizer=keras.optimizers.Adam(learning_rate=0.0002, beta_1=0.5, beta_2=0.9),
                     g_loss_fn=lambda fake_img: generator_loss(fake_img, ops),
                     d_loss_fn=lambda real_img, fake_img: discriminator_loss(real_img, fake_img, ops))
    history = wgan.fit(train_images, batch_size=8, epochs=1, verbose=0)
    latent = np.random.RandomState(1).randn(4, latent_dim).astype("float32")
    return {"_model": wgan, "history": history.history, "generated": wgan.generator.predict(latent, verbose=0),
            "critic": wgan.discriminator.predict(train_images[:4], verbose=0)}
