"""tensorflow.org's tutorials/generative/cvae, typed as printed with ``tf.`` -> ``md.``, shrunk: the CVAE model
(``encode`` with ``tf.split``, ``reparameterize``, ``decode``, the ``@tf.function`` ``sample``), ``log_normal_pdf``,
``compute_loss`` with ``tf.nn.sigmoid_cross_entropy_with_logits``, the ``@tf.function`` ``train_step`` with a
``GradientTape`` and the test-set ELBO through ``tf.keras.metrics.Mean``; on one device and on a MirroredStrategy
of two (model and optimizer made in its scope, ``strategy.run`` of the tutorial's step).

Substitutions: MNIST is 24 synthetic binarized images (``binary_images``); the filter counts are 4/8 (the
tutorial's 32/64); ``tf.random.normal`` is a fixed table (``normal_table``: md refuses md.random.normal, naming
torch.randn); the datasets are not shuffled (TF's and torch's shuffles differ); weights are set after building.
"""

import numpy as np

from conformance_support import approx, binary_images, fixed_weights, normal_table, scope_of, two_cpus

LATENT_DIM = 2
TRAIN, TEST = binary_images(16, seed=1), binary_images(8, seed=2)


def _cvae_class(tf):
    class CVAE(tf.keras.Model):
        """Convolutional variational autoencoder."""

        def __init__(self, latent_dim):
            super(CVAE, self).__init__()
            self.latent_dim = latent_dim
            self.encoder = tf.keras.Sequential(
                [
                    tf.keras.layers.InputLayer(input_shape=(28, 28, 1)),
                    tf.keras.layers.Conv2D(
                        filters=4, kernel_size=3, strides=(2, 2), activation='relu'),
                    tf.keras.layers.Conv2D(
                        filters=8, kernel_size=3, strides=(2, 2), activation='relu'),
                    tf.keras.layers.Flatten(),
                    # No activation
                    tf.keras.layers.Dense(latent_dim + latent_dim),
                ]
            )

            self.decoder = tf.keras.Sequential(
                [
                    tf.keras.layers.InputLayer(input_shape=(latent_dim,)),
                    tf.keras.layers.Dense(units=7*7*4, activation='relu'),
                    tf.keras.layers.Reshape(target_shape=(7, 7, 4)),
                    tf.keras.layers.Conv2DTranspose(
                        filters=8, kernel_size=3, strides=2, padding='same',
                        activation='relu'),
                    tf.keras.layers.Conv2DTranspose(
                        filters=4, kernel_size=3, strides=2, padding='same',
                        activation='relu'),
                    # No activation
                    tf.keras.layers.Conv2DTranspose(
                        filters=1, kernel_size=3, strides=1, padding='same'),
                ]
            )

        @tf.function
        def sample(self, eps=None):
            if eps is None:
                eps = normal_table(tf, (100, self.latent_dim))
            return self.decode(eps, apply_sigmoid=True)

        def encode(self, x):
            mean, logvar = tf.split(self.encoder(x), num_or_size_splits=2, axis=1)
            return mean, logvar

        def reparameterize(self, mean, logvar):
            eps = normal_table(tf, mean.shape)
            return eps * tf.exp(logvar * .5) + mean

        def decode(self, z, apply_sigmoid=False):
            logits = self.decoder(z)
            if apply_sigmoid:
                probs = tf.sigmoid(logits)
                return probs
            return logits
    return CVAE


def _program(tf):
    """The tutorial's functions, for ``tf``."""
    def log_normal_pdf(sample, mean, logvar, raxis=1):
        log2pi = tf.math.log(2. * np.pi)
        return tf.reduce_sum(
            -.5 * ((sample - mean) ** 2. * tf.exp(-logvar) + logvar + log2pi),
            axis=raxis)

    def compute_loss(model, x):
        mean, logvar = model.encode(x)
        z = model.reparameterize(mean, logvar)
        x_logit = model.decode(z)
        cross_ent = tf.nn.sigmoid_cross_entropy_with_logits(logits=x_logit, labels=x)
        logpx_z = -tf.reduce_sum(cross_ent, axis=[1, 2, 3])
        logpz = log_normal_pdf(z, 0., 0.)
        logqz_x = log_normal_pdf(z, mean, logvar)
        return -tf.reduce_mean(logpx_z + logpz - logqz_x)

    return log_normal_pdf, compute_loss


def _model(tf, strategy=None):
    with scope_of(strategy):
        model = _cvae_class(tf)(LATENT_DIM)
        fixed_weights(model.encoder, 0.4)
        fixed_weights(model.decoder, 0.4)
        optimizer = tf.keras.optimizers.Adam(1e-2)
        if strategy is not None:   # TF 2.21 fails making the slots inside tf.function (loop_train.py)
            optimizer.build(model.trainable_variables)
    return model, optimizer


def case_encode_reparameterize_decode_loss(tf):
    model, _ = _model(tf)
    log_normal_pdf, compute_loss = _program(tf)
    x = tf.constant(TRAIN[:4])
    mean, logvar = model.encode(x)
    z = model.reparameterize(mean, logvar)
    probs = model.sample(z)
    return {"shapes": [list(mean.shape), list(logvar.shape), list(model.decode(z).shape), list(probs.shape)],
            "mean_logvar": approx([mean.numpy(), logvar.numpy()], 1e-5),
            "probs_sum": approx(float(tf.reduce_sum(probs).numpy()), 1e-3),
            "prior": approx(log_normal_pdf(z, 0., 0.).numpy(), 1e-5),
            "loss": approx(float(compute_loss(model, x).numpy()), 1e-3)}


def _train(tf, strategy=None, epochs=2):
    model, optimizer = _model(tf, strategy)
    _, compute_loss = _program(tf)
    train_dataset = tf.data.Dataset.from_tensor_slices(TRAIN).batch(8)
    test_dataset = tf.data.Dataset.from_tensor_slices(TEST).batch(8)

    @tf.function
    def train_step(model, x, optimizer):
        """Executes one training step and returns the loss."""
        with tf.GradientTape() as tape:
            loss = compute_loss(model, x)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))

    if strategy is not None:
        train_dataset = strategy.experimental_distribute_dataset(train_dataset)
    elbos = []
    for epoch in range(1, epochs + 1):
        for train_x in train_dataset:
            if strategy is None:
                train_step(model, train_x, optimizer)
            else:
                strategy.run(train_step, args=(model, train_x, optimizer))
        loss = tf.keras.metrics.Mean()
        for test_x in test_dataset:
            loss(compute_loss(model, test_x))
        elbo = -loss.result()
        elbos.append(float(elbo.numpy()))
    return {"elbo": approx(elbos, 2e-2),
            "encoder_kernel": approx(model.encoder.trainable_variables[-2].numpy()[:8], 2e-4),
            "decoder_bias": approx(model.decoder.trainable_variables[-1].numpy(), 2e-4)}


def case_train_step_and_test_elbo(tf):
    return _train(tf)


def case_train_step_two_replicas(tf):
    return _train(tf, two_cpus(tf))


def case_sigmoid_cross_entropy_arguments(tf):
    """The op's arguments as TF takes them: keywords or positions (labels first), numpy (float64 stays), lists,
    extreme logits; refused: a missing argument, shapes that differ, integer labels or logits, mixed floats."""
    from conformance_support import raises, rounded
    sce = tf.nn.sigmoid_cross_entropy_with_logits
    logits, labels = tf.constant([[1., -2.], [100., -100.]]), tf.constant([[1., 0.], [0., 1.]])
    out = sce(logits=logits, labels=labels)
    as_numpy = sce(logits=np.array([[1., -2.]]), labels=np.array([[1., 0.]]))
    return {"keywords": rounded(out), "positions": rounded(sce(labels, logits)),
            "dtype": [str(out.dtype).replace("torch.", "").replace("<dtype: '", "").rstrip("'>"),
                      str(as_numpy.dtype).replace("torch.", "").replace("<dtype: '", "").rstrip("'>")],
            "lists": rounded(sce(logits=[[1., -2.]], labels=[[0.5, 0.25]])),
            "refused": [raises(sce, logits=logits), raises(sce, logits=logits, labels=tf.constant([1., 0.])),
                        raises(sce, logits=logits, labels=tf.constant([[1, 0], [0, 1]])),
                        raises(sce, logits=tf.constant([1, 2]), labels=tf.constant([1, 0])),
                        raises(sce, logits=tf.constant([1.], tf.float64), labels=tf.constant([1.]))]}
