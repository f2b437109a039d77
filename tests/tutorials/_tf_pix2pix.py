"""tensorflow.org's tutorials/generative/pix2pix, typed as printed with ``tf.`` -> ``md.``, at 16x16.

Data: 4 (input, target) image pairs in [-1, 1] made here (never downloaded); batches of 2 (the page's
BATCH_SIZE 1 cannot split over 2 replicas); the U-Net has 4 down and 3 up blocks of 8 filters, the
PatchGAN 2 down blocks; 2 train steps. Substitution on md: ``tf.random_normal_initializer(0., 0.02)`` ->
``tf.keras.initializers.RandomNormal(0., 0.02)`` (md refuses the former naming the latter); every weight is
then set from a pattern of its shape (as ``_tf_transformer.by_shape``, BatchNormalization's moving statistics left). Left out: the ``tf.summary`` lines and
plotting. "<name>/2" runs ``train_step`` with ``strategy.run`` on a distributed dataset (the page has no
strategy). The upsample blocks' Dropout(0.5) is on "<name>", off on "<name>_no_dropout".
"""

import numpy as np

from _tf_core_common import IS_TF, _STRATEGY, copies_agree, rnd, scope, tf

OUTPUT_CHANNELS = 3
LAMBDA = 100
SIZE = 16
RATE = {"rate": 0.5}


def _initializer():
    return tf.random_normal_initializer(0., 0.02) if IS_TF else tf.keras.initializers.RandomNormal(0., 0.02)


def downsample(filters, size, apply_batchnorm=True):
    initializer = _initializer()
    result = tf.keras.Sequential()
    result.add(tf.keras.layers.Conv2D(filters, size, strides=2, padding='same', kernel_initializer=initializer,
                                      use_bias=False))
    if apply_batchnorm:
        result.add(tf.keras.layers.BatchNormalization())
    result.add(tf.keras.layers.LeakyReLU())
    return result


def upsample(filters, size, apply_dropout=False):
    initializer = _initializer()
    result = tf.keras.Sequential()
    result.add(tf.keras.layers.Conv2DTranspose(filters, size, strides=2, padding='same',
                                               kernel_initializer=initializer, use_bias=False))
    result.add(tf.keras.layers.BatchNormalization())
    if apply_dropout:
        result.add(tf.keras.layers.Dropout(RATE["rate"]))
    result.add(tf.keras.layers.ReLU())
    return result


def Generator():
    inputs = tf.keras.layers.Input(shape=[SIZE, SIZE, 3])
    down_stack = [downsample(8, 4, apply_batchnorm=False), downsample(8, 4), downsample(8, 4), downsample(8, 4)]
    up_stack = [upsample(8, 4, apply_dropout=True), upsample(8, 4, apply_dropout=True), upsample(8, 4)]
    initializer = _initializer()
    last = tf.keras.layers.Conv2DTranspose(OUTPUT_CHANNELS, 4, strides=2, padding='same',
                                           kernel_initializer=initializer, activation='tanh')
    x = inputs
    skips = []
    for down in down_stack:
        x = down(x)
        skips.append(x)
    skips = reversed(skips[:-1])
    for up, skip in zip(up_stack, skips):
        x = up(x)
        x = tf.keras.layers.Concatenate()([x, skip])
    x = last(x)
    return tf.keras.Model(inputs=inputs, outputs=x)


def Discriminator():
    initializer = _initializer()
    inp = tf.keras.layers.Input(shape=[SIZE, SIZE, 3], name='input_image')
    tar = tf.keras.layers.Input(shape=[SIZE, SIZE, 3], name='target_image')
    x = tf.keras.layers.concatenate([inp, tar])
    down1 = downsample(8, 4, False)(x)
    down2 = downsample(8, 4)(down1)
    zero_pad1 = tf.keras.layers.ZeroPadding2D()(down2)
    conv = tf.keras.layers.Conv2D(8, 4, strides=1, kernel_initializer=initializer, use_bias=False)(zero_pad1)
    batchnorm1 = tf.keras.layers.BatchNormalization()(conv)
    leaky_relu = tf.keras.layers.LeakyReLU()(batchnorm1)
    zero_pad2 = tf.keras.layers.ZeroPadding2D()(leaky_relu)
    last = tf.keras.layers.Conv2D(1, 4, strides=1, kernel_initializer=initializer)(zero_pad2)
    return tf.keras.Model(inputs=[inp, tar], outputs=last)


def _pattern(model):
    """``by_shape`` on the trainable weights only: BatchNormalization's moving variance stays 1."""
    for v in model.trainable_variables:
        v.assign((np.sin(np.arange(int(np.prod(v.shape))) * 0.37 + len(v.shape)) * 0.3).reshape(
            tuple(v.shape)).astype("float32"))


def _images(n, seed):
    rng = np.random.RandomState(seed)
    grid = np.sin(np.arange(SIZE)[:, None] * 0.5 + np.arange(SIZE)[None, :] * 0.3)
    base = grid[None, :, :, None] * rng.uniform(0.3, 1.0, size=(n, 1, 1, 3))
    return np.clip(base + rng.uniform(-0.2, 0.2, size=(n, SIZE, SIZE, 3)), -1, 1).astype("float32")


def pix2pix(replicas, rate=0.5):
    RATE["rate"] = rate
    out = {}
    inputs, targets = _images(4, 1), _images(4, 2)
    with scope(replicas):
        generator = Generator()
        discriminator = Discriminator()
        _pattern(generator)
        _pattern(discriminator)
        loss_object = tf.keras.losses.BinaryCrossentropy(from_logits=True)
        generator_optimizer = tf.keras.optimizers.Adam(2e-4, beta_1=0.5)
        discriminator_optimizer = tf.keras.optimizers.Adam(2e-4, beta_1=0.5)

    def generator_loss(disc_generated_output, gen_output, target):
        gan_loss = loss_object(tf.ones_like(disc_generated_output), disc_generated_output)
        l1_loss = tf.reduce_mean(tf.abs(target - gen_output))
        total_gen_loss = gan_loss + (LAMBDA * l1_loss)
        return total_gen_loss, gan_loss, l1_loss

    def discriminator_loss(disc_real_output, disc_generated_output):
        real_loss = loss_object(tf.ones_like(disc_real_output), disc_real_output)
        generated_loss = loss_object(tf.zeros_like(disc_generated_output), disc_generated_output)
        total_disc_loss = real_loss + generated_loss
        return total_disc_loss

    inp = tf.constant(inputs[0])
    gen_output = generator(inp[tf.newaxis, ...], training=False)
    disc_out = discriminator([inp[tf.newaxis, ...], gen_output], training=False)
    out["shapes"] = [list(gen_output.shape), list(disc_out.shape)]
    out["count_params"] = [generator.count_params(), discriminator.count_params()]
    out["gen_output"] = rnd(gen_output[0, :2, :2, 0], 4)
    out["disc_out"] = rnd(disc_out[0, :, :, 0], 4)

    @tf.function
    def train_step(input_image, target, step):
        with tf.GradientTape() as gen_tape, tf.GradientTape() as disc_tape:
            gen_output = generator(input_image, training=True)
            disc_real_output = discriminator([input_image, target], training=True)
            disc_generated_output = discriminator([input_image, gen_output], training=True)
            gen_total_loss, gen_gan_loss, gen_l1_loss = generator_loss(disc_generated_output, gen_output, target)
            disc_loss = discriminator_loss(disc_real_output, disc_generated_output)
        generator_gradients = gen_tape.gradient(gen_total_loss, generator.trainable_variables)
        discriminator_gradients = disc_tape.gradient(disc_loss, discriminator.trainable_variables)
        generator_optimizer.apply_gradients(zip(generator_gradients, generator.trainable_variables))
        discriminator_optimizer.apply_gradients(zip(discriminator_gradients, discriminator.trainable_variables))
        return gen_total_loss, disc_loss

    train_ds = tf.data.Dataset.from_tensor_slices((inputs, targets)).batch(2)
    losses = []
    if replicas == 1:
        for step, (input_image, target) in train_ds.enumerate():
            losses.append([rnd(v, 5) for v in train_step(input_image, target, step)])
    else:
        strategy = _STRATEGY["s"]
        for step, (input_image, target) in enumerate(strategy.experimental_distribute_dataset(train_ds)):
            per_replica = strategy.run(train_step, args=(input_image, target, step))
            losses.append([rnd(strategy.reduce("MEAN", v, axis=None), 5) for v in per_replica])
    out["losses"] = losses
    out["trained"] = [rnd(float(np.abs(w).sum()), 4) for w in generator.get_weights()[:3]]
    prediction = generator(tf.constant(inputs[:2]), training=False)
    out["prediction"] = rnd(prediction[0, :2, :2, 0], 4)
    out["copies_agree"] = copies_agree(generator.trainable_variables + discriminator.trainable_variables)
    return out


def pix2pix_no_dropout(replicas):
    return pix2pix(replicas, rate=0.0)


PROGRAMS = []
REPLICATED = [pix2pix, pix2pix_no_dropout]
