"""tensorflow.org's tutorials/generative/dcgan, typed as printed with ``tf.`` -> ``md.``, shrunk: the generator
(Dense, BatchNormalization, LeakyReLU, Conv2DTranspose, its ``output_shape`` asserts) and the discriminator
(Conv2D, LeakyReLU, Dropout), ``BinaryCrossentropy(from_logits=True)`` losses, two Adam optimizers, the
``@tf.function`` ``train_step`` with two tapes, the tutorial's ``tf.train.Checkpoint`` saved and restored from a
relative directory; on one device and on a MirroredStrategy of two (models and optimizers made in its scope,
``strategy.run`` of the tutorial's step on a distributed dataset).

Substitutions: MNIST is 16 synthetic images scaled to [-1, 1] as printed; filters are 8/4/2 (generator) and 4/8
(discriminator), the tutorial's 256/128/64 and 64/128, and the noise has 10 dimensions (100); ``tf.random.normal``
is a fixed table (``normal_table``); the dataset is not shuffled; weights are set after building. Dropout draws
differ between TensorFlow and torch, so the numbers are compared with the tutorial's Dropout(0.3) set to 0.0
(``_no_dropout`` cases); the printed rate is checked for what does not depend on the masks.
"""

import numpy as np

from conformance_support import InTempDirectory, approx, normal_table, scope_of, two_cpus

BATCH_SIZE = 8
NOISE_DIM = 10
_PIXELS = (np.arange(16 * 28 * 28).reshape(16, 28, 28) * 37 % 256).astype("uint8")


def _train_images():
    train_images = _PIXELS.reshape(_PIXELS.shape[0], 28, 28, 1).astype('float32')
    train_images = (train_images - 127.5) / 127.5  # Normalize the images to [-1, 1]
    return train_images


def _fix(model, scale=0.5):
    """Trainable weights set to a fixed pattern (BatchNormalization's moving statistics keep their start)."""
    for v in model.trainable_variables:
        n = int(np.prod(v.shape))
        v.assign((np.array([((k * 7) % 13) / 13.0 - 0.45 for k in range(n)], "float32") * scale).reshape(v.shape))
    return model


def _models(tf, rate, strategy=None):
    layers = tf.keras.layers

    def make_generator_model():
        model = tf.keras.Sequential()
        model.add(layers.Dense(7*7*8, use_bias=False, input_shape=(NOISE_DIM,)))
        model.add(layers.BatchNormalization())
        model.add(layers.LeakyReLU())

        model.add(layers.Reshape((7, 7, 8)))
        assert model.output_shape == (None, 7, 7, 8)  # Note: None is the batch size

        model.add(layers.Conv2DTranspose(4, (5, 5), strides=(1, 1), padding='same', use_bias=False))
        assert model.output_shape == (None, 7, 7, 4)
        model.add(layers.BatchNormalization())
        model.add(layers.LeakyReLU())

        model.add(layers.Conv2DTranspose(2, (5, 5), strides=(2, 2), padding='same', use_bias=False))
        assert model.output_shape == (None, 14, 14, 2)
        model.add(layers.BatchNormalization())
        model.add(layers.LeakyReLU())

        model.add(layers.Conv2DTranspose(1, (5, 5), strides=(2, 2), padding='same', use_bias=False, activation='tanh'))
        assert model.output_shape == (None, 28, 28, 1)

        return model

    def make_discriminator_model():
        model = tf.keras.Sequential()
        model.add(layers.Conv2D(4, (5, 5), strides=(2, 2), padding='same',
                                input_shape=[28, 28, 1]))
        model.add(layers.LeakyReLU())
        model.add(layers.Dropout(rate))

        model.add(layers.Conv2D(8, (5, 5), strides=(2, 2), padding='same'))
        model.add(layers.LeakyReLU())
        model.add(layers.Dropout(rate))

        model.add(layers.Flatten())
        model.add(layers.Dense(1))

        return model

    with scope_of(strategy):
        generator = _fix(make_generator_model())
        discriminator = _fix(make_discriminator_model())
        generator_optimizer = tf.keras.optimizers.Adam(1e-2)
        discriminator_optimizer = tf.keras.optimizers.Adam(1e-2)
        if strategy is not None:   # TF 2.21 fails making the slots inside tf.function (loop_train.py)
            generator_optimizer.build(generator.trainable_variables)
            discriminator_optimizer.build(discriminator.trainable_variables)
    return generator, discriminator, generator_optimizer, discriminator_optimizer


def _losses(tf):
    # This method returns a helper function to compute cross entropy loss
    cross_entropy = tf.keras.losses.BinaryCrossentropy(from_logits=True)

    def discriminator_loss(real_output, fake_output):
        real_loss = cross_entropy(tf.ones_like(real_output), real_output)
        fake_loss = cross_entropy(tf.zeros_like(fake_output), fake_output)
        total_loss = real_loss + fake_loss
        return total_loss

    def generator_loss(fake_output):
        return cross_entropy(tf.ones_like(fake_output), fake_output)
    return discriminator_loss, generator_loss


def case_models_as_printed(tf):
    generator, discriminator, _, _ = _models(tf, 0.3)
    noise = normal_table(tf, [1, NOISE_DIM])
    generated_image = generator(noise, training=False)
    decision = discriminator(generated_image)
    return {"generated": [list(generated_image.shape), approx(float(tf.reduce_sum(generated_image).numpy()), 1e-4)],
            "decision": approx(decision.numpy(), 1e-5),
            "weights": [len(generator.trainable_variables), len(generator.variables),
                        len(discriminator.trainable_variables)]}


def _train(tf, rate=0.0, strategy=None, epochs=2, checkpoint_every=None):
    generator, discriminator, generator_optimizer, discriminator_optimizer = _models(tf, rate, strategy)
    discriminator_loss, generator_loss = _losses(tf)
    seed = normal_table(tf, [4, NOISE_DIM], offset=500)
    start = [v.numpy() for v in generator.trainable_variables + discriminator.trainable_variables]

    # Notice the use of `tf.function`
    # This annotation causes the function to be "compiled".
    @tf.function
    def train_step(images):
        noise = normal_table(tf, [images.shape[0], NOISE_DIM])

        with tf.GradientTape() as gen_tape, tf.GradientTape() as disc_tape:
            generated_images = generator(noise, training=True)

            real_output = discriminator(images, training=True)
            fake_output = discriminator(generated_images, training=True)

            gen_loss = generator_loss(fake_output)
            disc_loss = discriminator_loss(real_output, fake_output)

        gradients_of_generator = gen_tape.gradient(gen_loss, generator.trainable_variables)
        gradients_of_discriminator = disc_tape.gradient(disc_loss, discriminator.trainable_variables)

        generator_optimizer.apply_gradients(zip(gradients_of_generator, generator.trainable_variables))
        discriminator_optimizer.apply_gradients(zip(gradients_of_discriminator, discriminator.trainable_variables))

    train_dataset = tf.data.Dataset.from_tensor_slices(_train_images()).batch(BATCH_SIZE)
    if strategy is not None:
        train_dataset = strategy.experimental_distribute_dataset(train_dataset)
    for epoch in range(epochs):
        for image_batch in train_dataset:
            if strategy is None:
                train_step(image_batch)
            else:
                strategy.run(train_step, args=(image_batch,))
        if checkpoint_every is not None and (epoch + 1) % checkpoint_every[0] == 0:
            checkpoint_every[1].save(file_prefix=checkpoint_every[2])
    predictions = generator(seed, training=False)
    return {"generator": generator, "discriminator": discriminator, "start": start,
            "optimizers": (generator_optimizer, discriminator_optimizer),
            "predictions": predictions, "gen_loss": generator_loss(discriminator(predictions, training=False))}


def _numbers(out):
    generator, discriminator = out["generator"], out["discriminator"]
    moving = [v for v in generator.variables if "moving_mean" in v.name]
    return {"generator_kernel": approx(generator.trainable_variables[0].numpy()[:2, :12], 2e-4),
            "generator_last": approx(float(np.sum(generator.trainable_variables[-1].numpy())), 2e-3),
            "moving_mean": approx(moving[0].numpy()[:12], 2e-4),
            "discriminator_dense": approx(discriminator.trainable_variables[-2].numpy()[:6], 2e-4),
            "predictions_sum": approx(float(np.sum(out["predictions"].numpy())), 5e-3),
            "gen_loss": approx(float(out["gen_loss"].numpy()), 1e-4)}


def case_train_no_dropout(tf):
    return _numbers(_train(tf))


def case_train_no_dropout_two_replicas(tf):
    return _numbers(_train(tf, strategy=two_cpus(tf)))


def case_train_as_printed(tf):
    """Dropout(0.3) as printed: every weight moves, the losses are finite, the iterations count the steps."""
    out = _train(tf, rate=0.3)
    now = [v.numpy() for v in out["generator"].trainable_variables + out["discriminator"].trainable_variables]
    return {"all_moved": all(bool(np.any(a != b)) for a, b in zip(out["start"], now)),
            "finite": bool(np.isfinite(out["gen_loss"].numpy())),
            "iterations": [int(o.iterations.numpy()) for o in out["optimizers"]]}


def case_checkpoint_every_epoch_and_restore(tf):
    """The tutorial's checkpoint (every 15 epochs there, every epoch here) into './training_checkpoints', then
    ``checkpoint.restore(tf.train.latest_checkpoint(checkpoint_dir))`` after the weights changed."""
    import os
    with InTempDirectory():
        generator, discriminator, generator_optimizer, discriminator_optimizer = _models(tf, 0.0)
        checkpoint_dir = './training_checkpoints'
        checkpoint_prefix = os.path.join(checkpoint_dir, "ckpt")
        checkpoint = tf.train.Checkpoint(generator_optimizer=generator_optimizer,
                                         discriminator_optimizer=discriminator_optimizer,
                                         generator=generator,
                                         discriminator=discriminator)
        checkpoint.save(file_prefix=checkpoint_prefix)
        saved = [v.numpy() for v in generator.variables + discriminator.trainable_variables]
        for v in generator.variables + discriminator.trainable_variables:
            v.assign(v * 0.5 + 0.25)
        latest = tf.train.latest_checkpoint(checkpoint_dir)
        checkpoint.restore(latest)
        restored = [v.numpy() for v in generator.variables + discriminator.trainable_variables]
    return {"latest": latest, "restored": all(bool(np.array_equal(a, b)) for a, b in zip(saved, restored))}
