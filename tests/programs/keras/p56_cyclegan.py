"""keras.io/examples/generative/cyclegan: two ResNet generators (``ReflectionPadding2D`` layer with ``ops.pad``
``mode="reflect"``, ``GroupNormalization(groups=-1)`` as instance normalisation, residual blocks,
``Conv2DTranspose`` upsampling) and two PatchGAN discriminators; a ``CycleGan`` model whose
``compile(gen_G_optimizer, gen_F_optimizer, disc_X_optimizer, disc_Y_optimizer, gen_loss_fn, disc_loss_fn)``
takes four Adams and two loss functions, and whose ``train_step`` (``tf.GradientTape(persistent=True)`` ->
``md.GradientTape(persistent=True)``) sums the adversarial, cycle (``MeanAbsoluteError`` x lambda_cycle) and
identity losses, takes four gradients from one tape and applies four optimizers; returns the raw losses; a
``predict`` through the trained generator.

Shrunk: 8x8 RGB images (32 per domain), 4 filters, one downsampling, 1 residual block, batch 8, 1 epoch.
"""

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/generative/cyclegan/"


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops
    keras.utils.set_random_seed(0)   # before the initializers: an unseeded one draws its int seed when made
    input_img_size = (8, 8, 3)
    kernel_init = keras.initializers.RandomNormal(mean=0.0, stddev=0.02)
    gamma_init = keras.initializers.RandomNormal(mean=0.0, stddev=0.02)

    class ReflectionPadding2D(layers.Layer):
        def __init__(self, padding=(1, 1), **kwargs):
            self.padding = tuple(padding)
            super().__init__(**kwargs)

        def call(self, input_tensor, mask=None):
            padding_width, padding_height = self.padding
            padding_tensor = [[0, 0], [padding_height, padding_height], [padding_width, padding_width], [0, 0]]
            return ops.pad(input_tensor, padding_tensor, mode="reflect")

    def residual_block(x, activation, kernel_initializer=kernel_init, kernel_size=(3, 3), strides=(1, 1),
                       padding="valid", gamma_initializer=gamma_init, use_bias=False):
        dim = x.shape[-1]
        input_tensor = x
        x = ReflectionPadding2D()(input_tensor)
        x = layers.Conv2D(dim, kernel_size, strides=strides, kernel_initializer=kernel_initializer,
                          padding=padding, use_bias=use_bias)(x)
        x = layers.GroupNormalization(groups=-1, gamma_initializer=gamma_initializer)(x)
        x = activation(x)
        x = ReflectionPadding2D()(x)
        x = layers.Conv2D(dim, kernel_size, strides=strides, kernel_initializer=kernel_initializer,
                          padding=padding, use_bias=use_bias)(x)
        x = layers.GroupNormalization(groups=-1, gamma_initializer=gamma_initializer)(x)
        x = layers.add([input_tensor, x])
        return x

    def downsample(x, filters, activation, kernel_initializer=kernel_init, kernel_size=(3, 3), strides=(2, 2),
                   padding="same", gamma_initializer=gamma_init, use_bias=False):
        x = layers.Conv2D(filters, kernel_size, strides=strides, kernel_initializer=kernel_initializer,
                          padding=padding, use_bias=use_bias)(x)
        x = layers.GroupNormalization(groups=-1, gamma_initializer=gamma_initializer)(x)
        if activation:
            x = activation(x)
        return x

    def upsample(x, filters, activation, kernel_size=(3, 3), strides=(2, 2), padding="same",
                 kernel_initializer=kernel_init, gamma_initializer=gamma_init, use_bias=False):
        x = layers.Conv2DTranspose(filters, kernel_size, strides=strides, padding=padding,
                                   kernel_initializer=kernel_initializer, use_bias=use_bias)(x)
        x = layers.GroupNormalization(groups=-1, gamma_initializer=gamma_initializer)(x)
        if activation:
            x = activation(x)
        return x

    def get_resnet_generator(filters=4, num_downsampling_blocks=1, num_residual_blocks=1, num_upsample_blocks=1,
                             gamma_initializer=gamma_init, name=None):
        img_input = layers.Input(shape=input_img_size, name=name + "_img_input")
        x = ReflectionPadding2D(padding=(3, 3))(img_input)
        x = layers.Conv2D(filters, (7, 7), kernel_initializer=kernel_init, use_bias=False)(x)
        x = layers.GroupNormalization(groups=-1, gamma_initializer=gamma_initializer)(x)
        x = layers.Activation("relu")(x)
        for _ in range(num_downsampling_blocks):
            filters *= 2
            x = downsample(x, filters=filters, activation=layers.Activation("relu"))
        for _ in range(num_residual_blocks):
            x = residual_block(x, activation=layers.Activation("relu"))
        for _ in range(num_upsample_blocks):
            filters //= 2
            x = upsample(x, filters, activation=layers.Activation("relu"))
        x = ReflectionPadding2D(padding=(3, 3))(x)
        x = layers.Conv2D(3, (7, 7), padding="valid")(x)
        x = layers.Activation("tanh")(x)
        return keras.models.Model(img_input, x, name=name)

    def get_discriminator(filters=4, kernel_initializer=kernel_init, num_downsampling=1, name=None):
        img_input = layers.Input(shape=input_img_size, name=name + "_img_input")
        x = layers.Conv2D(filters, (4, 4), strides=(2, 2), padding="same", kernel_initializer=kernel_initializer)(
            img_input)
        x = layers.LeakyReLU(0.2)(x)
        num_filters = filters
        for num_downsample_block in range(num_downsampling):
            num_filters *= 2
            x = downsample(x, filters=num_filters, activation=layers.LeakyReLU(0.2), kernel_size=(4, 4),
                           strides=(2, 2))
        x = layers.Conv2D(1, (4, 4), strides=(1, 1), padding="same", kernel_initializer=kernel_initializer)(x)
        return keras.models.Model(inputs=img_input, outputs=x, name=name)

    class CycleGan(keras.Model):
        def __init__(self, generator_G, generator_F, discriminator_X, discriminator_Y, lambda_cycle=10.0,
                     lambda_identity=0.5):
            super().__init__()
            self.gen_G = generator_G
            self.gen_F = generator_F
            self.disc_X = discriminator_X
            self.disc_Y = discriminator_Y
            self.lambda_cycle = lambda_cycle
            self.lambda_identity = lambda_identity

        def call(self, inputs):
            return (self.disc_X(inputs), self.disc_Y(inputs), self.gen_G(inputs), self.gen_F(inputs))

        def compile(self, gen_G_optimizer, gen_F_optimizer, disc_X_optimizer, disc_Y_optimizer, gen_loss_fn,
                    disc_loss_fn):
            super().compile()
            self.gen_G_optimizer = gen_G_optimizer
            self.gen_F_optimizer = gen_F_optimizer
            self.disc_X_optimizer = disc_X_optimizer
            self.disc_Y_optimizer = disc_Y_optimizer
            self.generator_loss_fn = gen_loss_fn
            self.discriminator_loss_fn = disc_loss_fn
            self.cycle_loss_fn = keras.losses.MeanAbsoluteError()
            self.identity_loss_fn = keras.losses.MeanAbsoluteError()

        def train_step(self, batch_data):
            real_x, real_y = batch_data
            with md.GradientTape(persistent=True) as tape:
                fake_y = self.gen_G(real_x, training=True)
                fake_x = self.gen_F(real_y, training=True)
                cycled_x = self.gen_F(fake_y, training=True)
                cycled_y = self.gen_G(fake_x, training=True)
                same_x = self.gen_F(real_x, training=True)
                same_y = self.gen_G(real_y, training=True)
                disc_real_x = self.disc_X(real_x, training=True)
                disc_fake_x = self.disc_X(fake_x, training=True)
                disc_real_y = self.disc_Y(real_y, training=True)
                disc_fake_y = self.disc_Y(fake_y, training=True)
                gen_G_loss = self.generator_loss_fn(disc_fake_y)
                gen_F_loss = self.generator_loss_fn(disc_fake_x)
                cycle_loss_G = self.cycle_loss_fn(real_y, cycled_y) * self.lambda_cycle
                cycle_loss_F = self.cycle_loss_fn(real_x, cycled_x) * self.lambda_cycle
                id_loss_G = self.identity_loss_fn(real_y, same_y) * self.lambda_cycle * self.lambda_identity
                id_loss_F = self.identity_loss_fn(real_x, same_x) * self.lambda_cycle * self.lambda_identity
                total_loss_G = gen_G_loss + cycle_loss_G + id_loss_G
                total_loss_F = gen_F_loss + cycle_loss_F + id_loss_F
                disc_X_loss = self.discriminator_loss_fn(disc_real_x, disc_fake_x)
                disc_Y_loss = self.discriminator_loss_fn(disc_real_y, disc_fake_y)
            grads_G = tape.gradient(total_loss_G, self.gen_G.trainable_variables)
            grads_F = tape.gradient(total_loss_F, self.gen_F.trainable_variables)
            disc_X_grads = tape.gradient(disc_X_loss, self.disc_X.trainable_variables)
            disc_Y_grads = tape.gradient(disc_Y_loss, self.disc_Y.trainable_variables)
            self.gen_G_optimizer.apply_gradients(zip(grads_G, self.gen_G.trainable_variables))
            self.gen_F_optimizer.apply_gradients(zip(grads_F, self.gen_F.trainable_variables))
            self.disc_X_optimizer.apply_gradients(zip(disc_X_grads, self.disc_X.trainable_variables))
            self.disc_Y_optimizer.apply_gradients(zip(disc_Y_grads, self.disc_Y.trainable_variables))
            return {"G_loss": total_loss_G, "F_loss": total_loss_F, "D_X_loss": disc_X_loss, "D_Y_loss": disc_Y_loss}

    adv_loss_fn = keras.losses.MeanSquaredError()

    def generator_loss_fn(fake):
        return adv_loss_fn(ops.ones_like(fake), fake)

    def discriminator_loss_fn(real, fake):
        real_loss = adv_loss_fn(ops.ones_like(real), real)
        fake_loss = adv_loss_fn(ops.zeros_like(fake), fake)
        return (real_loss + fake_loss) * 0.5

    rng = np.random.RandomState(0)
    n = 32 * scale
    horses = (rng.rand(n, *input_img_size) * 2 - 1).astype("float32")
    zebras = np.clip(horses * 0.5 + np.sin(np.arange(8))[None, :, None, None] * 0.5, -1, 1).astype("float32")
    with strategy.scope():
        gen_G = get_resnet_generator(name="generator_G")
        gen_F = get_resnet_generator(name="generator_F")
        disc_X = get_discriminator(name="discriminator_X")
        disc_Y = get_discriminator(name="discriminator_Y")
        cycle_gan_model = CycleGan(generator_G=gen_G, generator_F=gen_F, discriminator_X=disc_X,
                                   discriminator_Y=disc_Y)
        cycle_gan_model.compile(gen_G_optimizer=keras.optimizers.Adam(learning_rate=2e-4, beta_1=0.5),
                                gen_F_optimizer=keras.optimizers.Adam(learning_rate=2e-4, beta_1=0.5),
                                disc_X_optimizer=keras.optimizers.Adam(learning_rate=2e-4, beta_1=0.5),
                                disc_Y_optimizer=keras.optimizers.Adam(learning_rate=2e-4, beta_1=0.5),
                                gen_loss_fn=generator_loss_fn, disc_loss_fn=discriminator_loss_fn)
    history = cycle_gan_model.fit(horses, zebras, batch_size=8, epochs=1, shuffle=False, verbose=0)
    prediction = cycle_gan_model.gen_G.predict(horses[:4], verbose=0)
    return {"_model": cycle_gan_model, "history": history.history, "prediction": prediction[:, :4, :4],
            "disc_Y": cycle_gan_model.disc_Y.get_weights()[0]}
