"""keras.io's "Making new layers and models via subclassing" (Keras 3, TF 2.21's ``tf.keras``), typed as
printed with ``keras`` -> ``md.keras`` (``tf.keras`` on TensorFlow), shrunk, on one device and on a
MirroredStrategy of two: ``add_weight``, non-trainable weights (``ComputeSum``), deferred ``build``, nested
layers, ``add_loss`` (``layer.losses`` reset per call, a kernel regularizer's loss, ``compile`` with and
without a loss), ``get_config``/``from_config``, the ``training`` argument and the VAE.

Substitutions: the ``random_normal`` weights are set to a fixed pattern after building, ``np.random.random``
data is a fixed table, and the VAE's ``Sampling`` takes its epsilon from a fixed table (TensorFlow's and
torch's generators differ); ``add_metric`` (gone in Keras 3) is observed as the error it raises.
"""

from conformance_support import fixed_weights, scope_of, two_cpus, val

X = [[((i * 5 + j * 3) % 7) / 7.0 - 0.3 for j in range(3)] for i in range(8)]
Y = [[((i * 2 + j) % 5) / 5.0 for j in range(3)] for i in range(8)]
IMAGES = [[((i * 7 + j * 3) % 11) / 11.0 for j in range(12)] for i in range(16)]
EPSILON = [[((i * 3 + j * 5) % 9) / 9.0 - 0.45 for j in range(2)] for i in range(16)]


def _r(x, digits=5):
    x = val(x)
    if isinstance(x, dict):
        return {k: _r(v, digits) for k, v in x.items()}
    return [_r(v, digits) for v in x] if isinstance(x, list) else round(float(x), digits)


def _linear_classes(keras, ops):
    """The guide's three ``Linear`` layers: weights in ``__init__``, in ``build``, and with ``get_config``."""

    class Linear(keras.layers.Layer):
        def __init__(self, units=32, input_dim=32):
            super().__init__()
            self.w = self.add_weight(
                shape=(input_dim, units),
                initializer="random_normal",
                trainable=True,
            )
            self.b = self.add_weight(shape=(units,), initializer="zeros", trainable=True)

        def call(self, inputs):
            return ops.matmul(inputs, self.w) + self.b

    class LazyLinear(keras.layers.Layer):
        def __init__(self, units=32, **kwargs):
            super().__init__(**kwargs)
            self.units = units

        def build(self, input_shape):
            self.w = self.add_weight(
                shape=(input_shape[-1], self.units),
                initializer="random_normal",
                trainable=True,
            )
            self.b = self.add_weight(shape=(self.units,), initializer="random_normal", trainable=True)

        def call(self, inputs):
            return ops.matmul(inputs, self.w) + self.b

        def get_config(self):
            config = super().get_config()
            config.update({"units": self.units})
            return config

    return Linear, LazyLinear


def case_weights_in_init(tf):
    keras, ops = tf.keras, tf.keras.ops
    Linear, _ = _linear_classes(keras, ops)
    x = ops.ones((2, 2))
    linear_layer = Linear(4, 2)
    fixed_weights(linear_layer, 0.5)
    y = linear_layer(x)
    return [_r(y), linear_layer.weights == [linear_layer.w, linear_layer.b],
            [len(linear_layer.trainable_weights), len(linear_layer.non_trainable_weights)]]


def _compute_sum(keras, ops):
    class ComputeSum(keras.layers.Layer):
        def __init__(self, input_dim):
            super().__init__()
            self.total = self.add_weight(
                initializer="zeros", shape=(input_dim,), trainable=False
            )

        def call(self, inputs):
            self.total.assign_add(ops.sum(inputs, axis=0))
            return self.total
    return ComputeSum


def case_non_trainable_weights(tf):
    keras, ops = tf.keras, tf.keras.ops
    x = ops.ones((2, 2))
    my_sum = _compute_sum(keras, ops)(2)
    y = my_sum(x)
    first = _r(y.numpy())
    y = my_sum(x)
    return [first, _r(y.numpy()), len(my_sum.weights), len(my_sum.non_trainable_weights),
            len(my_sum.trainable_weights)]


def case_deferred_build_and_nested_layers(tf):
    keras, ops = tf.keras, tf.keras.ops
    _, Linear = _linear_classes(keras, ops)
    linear_layer = Linear(32)
    before = [linear_layer.built, len(linear_layer.weights)]
    y = linear_layer(ops.ones((2, 2)))

    class MLPBlock(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.linear_1 = Linear(32)
            self.linear_2 = Linear(32)
            self.linear_3 = Linear(1)

        def call(self, inputs):
            x = self.linear_1(inputs)
            x = keras.activations.relu(x)
            x = self.linear_2(x)
            x = keras.activations.relu(x)
            return self.linear_3(x)

    mlp = MLPBlock()
    y2 = mlp(ops.ones(shape=(3, 64)))  # The first call to the `mlp` will create the weights
    fixed_weights(mlp, 0.2)
    return [before, [linear_layer.built, list(y.shape), [list(w.shape) for w in linear_layer.weights]],
            len(mlp.weights), len(mlp.trainable_weights), list(y2.shape), _r(mlp(ops.ones(shape=(3, 64))))]


def _activity_regularization(keras, ops):
    class ActivityRegularizationLayer(keras.layers.Layer):
        def __init__(self, rate=1e-2):
            super().__init__()
            self.rate = rate

        def call(self, inputs):
            self.add_loss(self.rate * ops.mean(inputs))
            return inputs
    return ActivityRegularizationLayer


def case_add_loss_reset_each_call(tf):
    keras, ops = tf.keras, tf.keras.ops
    ActivityRegularizationLayer = _activity_regularization(keras, ops)

    class OuterLayer(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.activity_reg = ActivityRegularizationLayer(1e-2)

        def call(self, inputs):
            return self.activity_reg(inputs)

    layer = OuterLayer()
    counts = [len(layer.losses)]  # No losses yet since the layer has never been called
    _ = layer(ops.zeros((1, 1)))
    counts.append(len(layer.losses))  # We created one loss value
    # `layer.losses` gets reset at the start of each __call__
    _ = layer(ops.ones((1, 1)) * 3.0)
    counts.append(len(layer.losses))  # This is the loss created during the call above
    return [counts, _r(layer.losses)]


def case_kernel_regularizer_loss(tf):
    keras, ops = tf.keras, tf.keras.ops

    class OuterLayerWithKernelRegularizer(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(
                32, kernel_regularizer=keras.regularizers.l2(1e-3)
            )

        def call(self, inputs):
            return self.dense(inputs)

    layer = OuterLayerWithKernelRegularizer()
    _ = layer(ops.zeros((1, 1)))
    fixed_weights(layer, 0.5)
    # This is `1e-3 * sum(layer.dense.kernel ** 2)`,
    # created by the `kernel_regularizer` above.
    return [len(layer.losses), _r(layer.losses)]


def _fit_add_loss(tf, strategy, with_loss):
    keras, ops = tf.keras, tf.keras.ops
    with scope_of(strategy):
        inputs = keras.Input(shape=(3,))
        outputs = keras.layers.Dense(3)(inputs)
        outputs = _activity_regularization(keras, ops)()(outputs)
        model = fixed_weights(keras.Model(inputs, outputs), 0.4)
        # If there is a loss passed in `compile`, the regularization
        # losses get added to it
        if with_loss:
            model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
        else:
            # It's also possible not to pass any loss in `compile`,
            # since the model already has a loss to minimize, via the `add_loss`
            # call during the forward pass!
            model.compile(optimizer=keras.optimizers.Adam(0.05))
    history = model.fit(tf.constant(X), tf.constant(Y), epochs=2, batch_size=4, shuffle=False, verbose=0)
    return [_r(history.history["loss"]), _r(model.get_weights(), 4)]


def case_fit_add_loss_with_compiled_loss(tf):
    return _fit_add_loss(tf, None, True)


def case_fit_add_loss_with_compiled_loss_two_replicas(tf):
    return _fit_add_loss(tf, two_cpus(tf), True)


def case_fit_add_loss_only(tf):
    return _fit_add_loss(tf, None, False)


def case_fit_add_loss_only_two_replicas(tf):
    return _fit_add_loss(tf, two_cpus(tf), False)


def case_get_config_from_config(tf):
    keras, ops = tf.keras, tf.keras.ops

    class Linear(keras.layers.Layer):   # the guide's first form: no **kwargs, a config of its own only
        def __init__(self, units=32):
            super().__init__()
            self.units = units

        def get_config(self):
            return {"units": self.units}

    layer = Linear(64)
    config = layer.get_config()
    new_layer = Linear.from_config(config)
    _, LazyLinear = _linear_classes(keras, ops)
    layer = LazyLinear(64, name="my_linear")
    config2 = layer.get_config()
    new_layer2 = LazyLinear.from_config(config2)
    return [config, new_layer.units, {k: config2[k] for k in ("name", "trainable", "units")},
            [new_layer2.name, new_layer2.units, new_layer2.built]]


def case_training_argument(tf):
    """The guide's ``CustomDropout``: the identity unless ``training``; in training every element of ones
    is 0 or 1 / (1 - rate) (which ones: the generator's draw)."""
    keras, ops = tf.keras, tf.keras.ops

    class CustomDropout(keras.layers.Layer):
        def __init__(self, rate, **kwargs):
            super().__init__(**kwargs)
            self.rate = rate
            self.seed_generator = keras.random.SeedGenerator(1337)

        def call(self, inputs, training=None):
            if training:
                return keras.random.dropout(
                    inputs, rate=self.rate, seed=self.seed_generator
                )
            return inputs

    layer = CustomDropout(0.5)
    x = ops.ones((8, 16))
    trained = val(layer(x, training=True))
    seen = sorted({round(v, 5) for row in trained for v in row})
    return [_r(layer(x)[0]), _r(layer(x, training=False)[0]), seen]


def case_add_metric_refused(tf):
    """Keras 3 has no ``Layer.add_metric``: the guide's metric is a ``Metric`` object updated in ``call``."""
    keras, ops = tf.keras, tf.keras.ops

    class WithMetric(keras.layers.Layer):
        def call(self, inputs):
            self.add_metric(ops.mean(inputs), name="mean")
            return inputs

    try:
        WithMetric()(ops.ones((2, 2)))
    except Exception as e:  # noqa: BLE001 - the observation is the type
        return type(e).__name__
    return None


def _vae(tf, strategy):
    keras, ops, layers = tf.keras, tf.keras.ops, tf.keras.layers

    class Sampling(layers.Layer):
        """Uses (z_mean, z_log_var) to sample z, the vector encoding a digit."""

        def call(self, inputs):
            z_mean, z_log_var = inputs
            batch = ops.shape(z_mean)[0]
            dim = ops.shape(z_mean)[1]
            epsilon = ops.convert_to_tensor(EPSILON)[:batch, :dim]   # keras.random.normal(shape=(batch, dim))
            return z_mean + ops.exp(0.5 * z_log_var) * epsilon

    class Encoder(layers.Layer):
        """Maps MNIST digits to a triplet (z_mean, z_log_var, z)."""

        def __init__(self, latent_dim=32, intermediate_dim=64, name="encoder", **kwargs):
            super().__init__(name=name, **kwargs)
            self.dense_proj = layers.Dense(intermediate_dim, activation="relu")
            self.dense_mean = layers.Dense(latent_dim)
            self.dense_log_var = layers.Dense(latent_dim)
            self.sampling = Sampling()

        def call(self, inputs):
            x = self.dense_proj(inputs)
            z_mean = self.dense_mean(x)
            z_log_var = self.dense_log_var(x)
            z = self.sampling((z_mean, z_log_var))
            return z_mean, z_log_var, z

    class Decoder(layers.Layer):
        """Converts z, the encoded digit vector, back into a readable digit."""

        def __init__(self, original_dim, intermediate_dim=64, name="decoder", **kwargs):
            super().__init__(name=name, **kwargs)
            self.dense_proj = layers.Dense(intermediate_dim, activation="relu")
            self.dense_output = layers.Dense(original_dim, activation="sigmoid")

        def call(self, inputs):
            x = self.dense_proj(inputs)
            return self.dense_output(x)

    class VariationalAutoEncoder(keras.Model):
        """Combines the encoder and decoder into an end-to-end model for training."""

        def __init__(self, original_dim, intermediate_dim=64, latent_dim=32, name="autoencoder", **kwargs):
            super().__init__(name=name, **kwargs)
            self.original_dim = original_dim
            self.encoder = Encoder(latent_dim=latent_dim, intermediate_dim=intermediate_dim)
            self.decoder = Decoder(original_dim, intermediate_dim=intermediate_dim)

        def call(self, inputs):
            z_mean, z_log_var, z = self.encoder(inputs)
            reconstructed = self.decoder(z)
            # Add KL divergence regularization loss.
            kl_loss = -0.5 * ops.mean(z_log_var - ops.square(z_mean) - ops.exp(z_log_var) + 1)
            self.add_loss(kl_loss)
            return reconstructed

    x_train = tf.constant(IMAGES)
    original_dim = 12
    with scope_of(strategy):
        vae = VariationalAutoEncoder(original_dim, 6, 2)
        vae(x_train[:2])
        fixed_weights(vae, 0.5)
        optimizer = keras.optimizers.Adam(learning_rate=1e-2)
        vae.compile(optimizer, loss=keras.losses.MeanSquaredError())
    history = vae.fit(x_train, x_train, epochs=2, batch_size=8, shuffle=False, verbose=0)
    return {"loss": _r(history.history["loss"]), "weights": _r(vae.get_weights()[0], 4),
            "n_weights": len(vae.weights), "submodules": sorted(layer.name for layer in vae.layers)}


def case_vae(tf):
    return _vae(tf, None)


def case_vae_two_replicas(tf):
    return _vae(tf, two_cpus(tf))
