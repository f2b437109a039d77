"""keras.io's "Making new layers and models via subclassing" (Keras 3, TF 2.21's ``tf.keras``), the cells
tests/keras/test_tf_guides.py (``_guides_layers.py``) leaves out, typed as printed with ``keras`` ->
``md.keras`` (``tf.keras`` on TensorFlow), shrunk: weights made in ``__init__``, a deferred ``build``, a kernel
regularizer's loss in ``layer.losses``, ``compile`` without a loss fitting the ``add_loss`` losses (one device
and a MirroredStrategy of two), the guide's first ``get_config`` (no ``**kwargs``), ``CustomDropout`` with
Keras's own ``random.dropout`` and ``add_metric``, which Keras 3 removed.

Substitutions: the ``random_normal`` weights are set to a fixed pattern after building and
``np.random.random`` data is a fixed table (TensorFlow's and torch's generators differ).
"""

from conformance_support import fixed_weights, rounded, scope_of, two_cpus, val

X = [[((i * 5 + j * 3) % 7) / 7.0 - 0.3 for j in range(3)] for i in range(8)]
Y = [[((i * 2 + j) % 5) / 5.0 for j in range(3)] for i in range(8)]


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
    return [rounded(y), linear_layer.weights == [linear_layer.w, linear_layer.b],
            [len(linear_layer.trainable_weights), len(linear_layer.non_trainable_weights)]]


def case_deferred_build(tf):
    keras, ops = tf.keras, tf.keras.ops
    _, Linear = _linear_classes(keras, ops)
    linear_layer = Linear(32)
    before = [linear_layer.built, len(linear_layer.weights)]
    y = linear_layer(ops.ones((2, 2)))
    return [before, [linear_layer.built, list(y.shape), [list(w.shape) for w in linear_layer.weights]]]


def _activity_regularization(keras, ops):
    class ActivityRegularizationLayer(keras.layers.Layer):
        def __init__(self, rate=1e-2):
            super().__init__()
            self.rate = rate

        def call(self, inputs):
            self.add_loss(self.rate * ops.mean(inputs))
            return inputs
    return ActivityRegularizationLayer


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
    return [len(layer.losses), rounded(layer.losses)]


def _fit_add_loss(tf, strategy):
    keras, ops = tf.keras, tf.keras.ops
    with scope_of(strategy):
        inputs = keras.Input(shape=(3,))
        outputs = keras.layers.Dense(3)(inputs)
        outputs = _activity_regularization(keras, ops)()(outputs)
        model = fixed_weights(keras.Model(inputs, outputs), 0.4)
        # It's also possible not to pass any loss in `compile`,
        # since the model already has a loss to minimize, via the `add_loss`
        # call during the forward pass!
        model.compile(optimizer=keras.optimizers.Adam(0.05))
    history = model.fit(tf.constant(X), tf.constant(Y), epochs=2, batch_size=4, shuffle=False, verbose=0)
    return [rounded(history.history["loss"]), rounded(model.get_weights(), 4)]


def case_fit_add_loss_only(tf):
    return _fit_add_loss(tf, None)


def case_fit_add_loss_only_two_replicas(tf):
    return _fit_add_loss(tf, two_cpus(tf))


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
    return [rounded(layer(x)[0]), rounded(layer(x, training=False)[0]), seen]


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
