"""keras.io/examples/keras_recipes/approximating_non_function_mappings as printed: first a plain regression
(``compile(optimizer="adam", loss="mse")``, ``fit(validation_split=0.15, EarlyStopping(monitor="val_loss"))``), then a
Mixture Density Network: a ``Sequential`` without an ``Input`` ending in a ``MixtureDensityOutput`` layer that holds
three ``Dense`` sublayers (one with a custom ``elu + 1 + epsilon`` activation), builds them in its ``build``,
OVERRIDES the ``trainable_weights`` and ``non_trainable_weights`` properties, and returns
``layers.concatenate([...], name="mdn_outputs")``; a custom loss function over that concatenated output (reshape,
split into means, scales and mixture logits, the negative log-likelihood of the mixture, ``reduce_mean``);
``fit(validation_split=0.15, EarlyStopping(monitor="loss", restore_best_weights=True), ReduceLROnPlateau(monitor=
"loss"))``; ``predict`` and numpy sampling from the predicted mixtures.

The example's loss builds ``tfd.Mixture`` of ``tfd.MultivariateNormalDiag`` (TensorFlow Probability): here the
same log-likelihood in ``keras.ops`` (``log_softmax`` of the logits plus the diagonal normals' log densities,
``logsumexp``); ``tf.split``'s sizes are ``ops.split``'s indices. Shrunk: 256 samples (3000), 16 hidden units (32),
5 mixtures (20), batch 32 (128), 4 epochs (300).
"""

import math

import numpy as np

SOURCE = "https://keras.io/examples/keras_recipes/approximating_non_function_mappings/"
N_SAMPLES, N_HIDDEN, OUTPUT_DIMS, N_MIXES, EPOCHS, BATCH = 256, 16, 1, 5, 4, 32


def run(keras, strategy, workdir, scale=1):
    layers, ops, callbacks = keras.layers, keras.ops, keras.callbacks
    rng = np.random.RandomState(0)
    y = rng.uniform(-10.5, 10.5, N_SAMPLES * scale)
    x = (7 * np.sin(0.75 * y) + 0.5 * y + rng.normal(size=y.shape)).reshape(-1, 1).astype("float32")
    y = y.reshape(-1, 1).astype("float32")
    keras.utils.set_random_seed(0)

    with strategy.scope():
        model = keras.Sequential([layers.Dense(N_HIDDEN, activation="relu"), layers.Dense(N_HIDDEN, activation="relu"),
                                  layers.Dense(1)])
        model.compile(optimizer="adam", loss="mse")
    mse_history = model.fit(x, y, epochs=EPOCHS, batch_size=BATCH, validation_split=0.15, verbose=0,
                            callbacks=[callbacks.EarlyStopping(monitor="val_loss", patience=5)])
    y_pred = model.predict(x, verbose=0)

    def elu_plus_one_plus_epsilon(x):
        return keras.activations.elu(x) + 1 + keras.backend.epsilon()

    class MixtureDensityOutput(layers.Layer):
        def __init__(self, output_dimension, num_mixtures, **kwargs):
            super().__init__(**kwargs)
            self.output_dim = output_dimension
            self.num_mix = num_mixtures
            self.mdn_mus = layers.Dense(self.num_mix * self.output_dim, name="mdn_mus")
            self.mdn_sigmas = layers.Dense(self.num_mix * self.output_dim, activation=elu_plus_one_plus_epsilon,
                                           name="mdn_sigmas")
            self.mdn_pi = layers.Dense(self.num_mix, name="mdn_pi")

        def build(self, input_shape):
            self.mdn_mus.build(input_shape)
            self.mdn_sigmas.build(input_shape)
            self.mdn_pi.build(input_shape)
            super().build(input_shape)

        @property
        def trainable_weights(self):
            return self.mdn_mus.trainable_weights + self.mdn_sigmas.trainable_weights + self.mdn_pi.trainable_weights

        @property
        def non_trainable_weights(self):
            return (self.mdn_mus.non_trainable_weights + self.mdn_sigmas.non_trainable_weights
                    + self.mdn_pi.non_trainable_weights)

        def call(self, x, mask=None):
            return layers.concatenate([self.mdn_mus(x), self.mdn_sigmas(x), self.mdn_pi(x)], name="mdn_outputs")

    def get_mixture_loss_func(output_dim, num_mixes):
        def mdn_loss_func(y_true, y_pred):
            y_pred = ops.reshape(y_pred, [-1, (2 * num_mixes * output_dim) + num_mixes])
            y_true = ops.reshape(y_true, [-1, output_dim])
            out_mu, out_sigma, out_pi = ops.split(y_pred, [num_mixes * output_dim, 2 * num_mixes * output_dim],
                                                  axis=-1)
            mus = ops.reshape(out_mu, [-1, num_mixes, output_dim])
            sigs = ops.reshape(out_sigma, [-1, num_mixes, output_dim])
            z = (ops.expand_dims(y_true, 1) - mus) / sigs
            component = ops.sum(-0.5 * z * z - ops.log(sigs) - 0.5 * math.log(2 * math.pi), axis=-1)
            loss = ops.logsumexp(ops.log_softmax(out_pi, axis=-1) + component, axis=-1)
            loss = ops.negative(loss)
            loss = ops.mean(loss)
            return loss
        return mdn_loss_func

    with strategy.scope():
        mdn_network = keras.Sequential([layers.Dense(N_HIDDEN, activation="relu"),
                                        layers.Dense(N_HIDDEN, activation="relu"),
                                        MixtureDensityOutput(OUTPUT_DIMS, N_MIXES)])
        mdn_network.compile(loss=get_mixture_loss_func(OUTPUT_DIMS, N_MIXES), optimizer="adam")
    mdn_history = mdn_network.fit(x, y, epochs=EPOCHS, batch_size=BATCH, validation_split=0.15, verbose=0,
                                  callbacks=[callbacks.EarlyStopping(monitor="loss", patience=10,
                                                                     restore_best_weights=True),
                                             callbacks.ReduceLROnPlateau(monitor="loss", patience=5)])
    y_pred_mixture = mdn_network.predict(x, verbose=0)

    def split_mixture_params(params, output_dim, num_mixes):
        return (params[: num_mixes * output_dim], params[num_mixes * output_dim: 2 * num_mixes * output_dim],
                params[-num_mixes:])

    def softmax(w, t=1.0):
        e = np.array(w) / t
        e -= e.max()
        e = np.exp(e)
        return e / np.sum(e)

    def sample_from_output(params, output_dim, num_mixes, temp=1.0, sigma_temp=1.0):
        mus, sigs, pi_logits = split_mixture_params(params, output_dim, num_mixes)
        m = np.random.choice(range(num_mixes), p=softmax(pi_logits, t=temp))
        scale_matrix = np.identity(output_dim) * sigs[m * output_dim: (m + 1) * output_dim]
        cov_matrix = np.matmul(scale_matrix, scale_matrix.T) * sigma_temp
        return np.random.multivariate_normal(mus[m * output_dim: (m + 1) * output_dim], cov_matrix, 1)

    np.random.seed(1)
    y_samples = np.apply_along_axis(sample_from_output, 1, y_pred_mixture[:16], 1, N_MIXES, temp=1.0)
    return {"_model": mdn_network, "mse": mse_history.history, "mse_predict": y_pred[:16],
            "mdn": mdn_history.history, "mdn_predict": y_pred_mixture[:16], "samples": y_samples,
            "mdn_trainable": len(mdn_network.trainable_weights)}
