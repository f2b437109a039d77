"""tensorflow.org's guide/mixed_precision, typed as printed with ``tf.`` -> ``md.`` (shrunk: 16 examples
of 8 features, 3 classes, 16 units; weights set so both sides start equal): the ``mixed_float16``
policy's dtypes, the Dense/Activation(float32) model, ``compile``+``fit`` (the optimizer wrapped in a
LossScaleOptimizer), the custom loop with ``get_scaled_loss``/``get_unscaled_gradients`` (tf.keras 2's
API, ``keras2``) and Keras 3's ``scale_loss``, and dynamic loss scaling with an inf gradient (the step
skipped, the scale halved), on one device and on a MirroredStrategy of two.

float16 computation rounds differently in TensorFlow's CPU kernels and torch's: losses and weights
are compared within an absolute tolerance (``approx``).
"""

from conformance_support import approx, dtype_name, fixed_weights, keras2, scope_of, two_cpus, val

X = [[((i * 5 + j * 3) % 11) / 11.0 - 0.3 for j in range(8)] for i in range(16)]
Y = [(i * 7) % 3 for i in range(16)]


def _r(x, atol=2e-3):
    """float16 results: losses within 0.002 of TensorFlow's (weights: closer)."""
    return approx(x, atol)


def _model(keras, layers):
    inputs = keras.Input(shape=(8,), name='digits')
    num_units = 16
    dense1 = layers.Dense(num_units, activation='relu', name='dense_1')
    x = dense1(inputs)
    dense2 = layers.Dense(num_units, activation='relu', name='dense_2')
    x = dense2(x)
    x = layers.Dense(3, name='dense_logits')(x)
    outputs = layers.Activation('softmax', dtype='float32', name='predictions')(x)
    model = keras.Model(inputs=inputs, outputs=outputs)
    fixed_weights(model, 0.5)
    return model


class _Policy:
    """Set the global policy for one case, float32 again afterwards (later cases must not inherit it)."""

    def __init__(self, mixed_precision, name='mixed_float16'):
        self.mixed_precision, self.name = mixed_precision, name

    def __enter__(self):
        self.mixed_precision.set_global_policy(self.name)

    def __exit__(self, *exc):
        self.mixed_precision.set_global_policy('float32')


def case_policy_dtypes(tf):
    keras = keras2(tf)
    layers, mixed_precision = keras.layers, keras.mixed_precision
    policy = mixed_precision.Policy('mixed_float16')
    with _Policy(mixed_precision, policy):
        inputs = keras.Input(shape=(8,), name='digits')
        dense1 = layers.Dense(16, activation='relu', name='dense_1')
        x = dense1(inputs)
        dense2 = layers.Dense(16, activation='relu', name='dense_2')
        x = dense2(x)
        incorrect = layers.Dense(3, activation='softmax', name='predictions')(x)
        x = layers.Dense(3, name='dense_logits')(x)
        outputs = layers.Activation('softmax', dtype='float32', name='predictions2')(x)
        linear = layers.Activation('linear', dtype='float32')(outputs)
        return {"compute": policy.compute_dtype, "variable": policy.variable_dtype, "name": policy.name,
                "layer_policy": dense1.dtype_policy.name, "x": dtype_name(x), "kernel": dtype_name(dense1.kernel),
                "incorrect_output": dtype_name(incorrect), "output": dtype_name(outputs),
                "linear": dtype_name(linear), "global": mixed_precision.global_policy().name}


def case_float16_overflow_underflow(tf):
    x = tf.constant(256, dtype='float16')
    big = (x ** 2).numpy()  # Overflow
    x = tf.constant(1e-5, dtype='float16')
    small = (x ** 2).numpy()  # Underflow
    return [str(big), float(small), dtype_name(x)]


def _fit(tf, strategy=None):
    keras = keras2(tf)
    with _Policy(keras.mixed_precision), scope_of(strategy):
        model = _model(keras, keras.layers)
        model.compile(loss='sparse_categorical_crossentropy', optimizer=keras.optimizers.RMSprop(),
                      metrics=['accuracy'])
        x_train, y_train = tf.constant(X), tf.constant(Y)
        history = model.fit(x_train, y_train, batch_size=8, epochs=2, verbose=0, shuffle=False)
        test_scores = model.evaluate(x_train, y_train, verbose=0)
        return {"optimizer": isinstance(model.optimizer, keras.mixed_precision.LossScaleOptimizer), "loss": _r(history.history["loss"]),
                "test": _r(test_scores), "output": dtype_name(model(x_train[:2]))}


def case_fit_mixed_float16(tf):
    return _fit(tf)


def case_fit_mixed_float16_two_replicas(tf):
    return _fit(tf, two_cpus(tf))


def _custom_loop(tf, keras, strategy=None, epochs=2):
    """The guide's loop: ``get_scaled_loss``/``get_unscaled_gradients`` around RMSprop, per-epoch mean
    loss and accuracy; with ``strategy`` inside ``strategy.run`` (the loss scaled by the global batch)."""
    mixed_precision = keras.mixed_precision
    with _Policy(mixed_precision), scope_of(strategy):
        model = _model(keras, keras.layers)
        optimizer = keras.optimizers.RMSprop()
        optimizer = mixed_precision.LossScaleOptimizer(optimizer)
        reduction = 'sum_over_batch_size' if strategy is None else 'none'
        loss_object = keras.losses.SparseCategoricalCrossentropy(reduction=reduction)
    train_dataset = tf.data.Dataset.from_tensor_slices((tf.constant(X), tf.constant(Y))).batch(8)

    def replica_loss(x, y):
        predictions = model(x)
        loss = loss_object(y, predictions)
        return loss if strategy is None else tf.nn.compute_average_loss(loss, global_batch_size=8)

    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = replica_loss(x, y)
            scaled_loss = optimizer.get_scaled_loss(loss)
        scaled_gradients = tape.gradient(scaled_loss, model.trainable_variables)
        gradients = optimizer.get_unscaled_gradients(scaled_gradients)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss

    if strategy is None:
        step = tf.function(train_step)
    else:
        step = tf.function(lambda x, y: strategy.reduce("SUM", strategy.run(train_step, args=(x, y)), axis=None))
        train_dataset = strategy.experimental_distribute_dataset(train_dataset)
    losses = []
    for epoch in range(epochs):
        epoch_loss_avg = keras.metrics.Mean()
        for x, y in train_dataset:
            loss = step(x, y)
            epoch_loss_avg(loss)
        losses.append(_r(epoch_loss_avg.result()))
    return {"losses": losses, "loss_scale": float(optimizer.loss_scale.numpy()),
            "iterations": int(optimizer.iterations.numpy()), "weights": _r(model.trainable_variables[-2].numpy(), 2e-4)}


def case_custom_loop_loss_scale(tf):
    return _custom_loop(tf, keras2(tf))


def case_custom_loop_loss_scale_two_replicas(tf):
    return _custom_loop(tf, keras2(tf), two_cpus(tf))


def _dynamic(tf, keras, grads_seq, strategy=None):
    """LossScaleOptimizer(SGD(1.0), initial_scale=8, dynamic_growth_steps=2) applying given gradients:
    the variable, the loss scale and the iteration count after each step."""
    with scope_of(strategy):
        var = tf.Variable([1.0, 2.0])
        opt = keras.mixed_precision.LossScaleOptimizer(keras.optimizers.SGD(1.0), initial_scale=8,
                                                       dynamic_growth_steps=2)
    out = []
    for g in grads_seq:
        if strategy is None:
            opt.apply_gradients([(tf.constant(g), var)])
        else:
            strategy.run(lambda: opt.apply_gradients([(tf.constant(g), var)]))
        out.append([val(var.numpy()), float(opt.loss_scale.numpy()), int(opt.iterations.numpy())])
    return out


INF = float("inf")
GRADS = [[INF, 1.0], [0.5, 0.5], [0.25, 0.25], [float("nan"), 0.0], [0.5, 0.5]]


def case_dynamic_loss_scale_inf_gradient(tf):
    return _dynamic(tf, keras2(tf), GRADS)


def case_dynamic_loss_scale_inf_gradient_two_replicas(tf):
    """Each replica applies the same gradients; summed across replicas before the update."""
    return _dynamic(tf, keras2(tf), GRADS, two_cpus(tf))


def case_keras3_scale_loss(tf):
    """Keras 3's spelling (TF 2.21's tf.keras): ``optimizer.scale_loss(loss)``; apply_gradients takes
    the scaled gradients and unscales them."""
    keras = tf.keras
    var = tf.Variable([1.0, 2.0])
    opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.5), initial_scale=4.0)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(var * var)
        scaled = opt.scale_loss(loss)
    grads = tape.gradient(scaled, [var])
    opt.apply_gradients(zip(grads, [var]))
    return [val(scaled), val(grads[0]), val(var.numpy())]
