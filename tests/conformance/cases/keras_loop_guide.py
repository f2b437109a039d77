"""keras.io's "Writing a training loop from scratch in TensorFlow" and "Customizing what happens in
fit() with TensorFlow" (Keras 3 on TensorFlow, TF 2.21's ``tf.keras``), typed as printed with ``tf.`` ->
``md.``, shrunk (24 examples, small Dense models, weights set so both sides start equal), on one device
and on a MirroredStrategy of two: metrics' ``update_state``/``result``/``reset_state``, a
``@tf.function`` ``train_step``, ``model.losses`` from ``add_loss``, ``compute_loss``, the ``metrics``
property and a custom ``test_step`` (the GAN example: keras_gan_guide.py).
"""

from conformance_support import fixed_weights, scope_of, two_cpus, val

N = 24
X = [[((i * 5 + j * 3) % 11) / 11.0 - 0.4 for j in range(6)] for i in range(N)]
Y_CLASS = [(i * 7) % 4 for i in range(N)]
Y_REG = [[((i * 3) % 5) / 5.0] for i in range(N)]


def _r(x, digits=5):
    x = val(x)
    if isinstance(x, dict):
        return {k: _r(v, digits) for k, v in x.items()}
    return [_r(v, digits) for v in x] if isinstance(x, list) else round(float(x), digits)


def _fix(model):
    """Fixed starting weights."""
    return fixed_weights(model, 0.6)


def _loop(tf, strategy=None, regularized=False, epochs=2):
    keras = tf.keras

    class ActivityRegularizationLayer(keras.layers.Layer):
        def call(self, inputs):
            self.add_loss(1e-2 * tf.reduce_sum(inputs))
            return inputs

    with scope_of(strategy):
        inputs = keras.Input(shape=(6,), name="digits")
        x1 = keras.layers.Dense(8, activation="relu")(inputs)
        if regularized:
            x1 = ActivityRegularizationLayer()(x1)
        x2 = keras.layers.Dense(8, activation="relu")(x1)
        outputs = keras.layers.Dense(4, name="predictions")(x2)
        model = _fix(keras.Model(inputs=inputs, outputs=outputs))
        optimizer = keras.optimizers.Adam(learning_rate=1e-2)
        if strategy is not None:   # TF 2.21 fails making the slots inside tf.function (loop_train.py)
            optimizer.build(model.trainable_weights)
        reduction = "sum_over_batch_size" if strategy is None else "none"
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)
        train_acc_metric = keras.metrics.SparseCategoricalAccuracy()
        val_acc_metric = keras.metrics.SparseCategoricalAccuracy()
    train_dataset = tf.data.Dataset.from_tensor_slices((tf.constant(X[:16]), tf.constant(Y_CLASS[:16]))).batch(8)
    val_dataset = tf.data.Dataset.from_tensor_slices((tf.constant(X[16:]), tf.constant(Y_CLASS[16:]))).batch(4)

    def replica_train_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss_value = loss_fn(y, logits)
            if strategy is not None:
                loss_value = tf.nn.compute_average_loss(loss_value, global_batch_size=8)
            # Add any extra losses created during the forward pass.
            loss_value += sum(model.losses)
        grads = tape.gradient(loss_value, model.trainable_weights)
        optimizer.apply(grads, model.trainable_weights)
        train_acc_metric.update_state(y, logits)
        return loss_value

    def replica_test_step(x, y):
        val_logits = model(x, training=False)
        val_acc_metric.update_state(y, val_logits)

    if strategy is None:
        train_step, test_step = tf.function(replica_train_step), tf.function(replica_test_step)
    else:
        train_dataset = strategy.experimental_distribute_dataset(train_dataset)
        val_dataset = strategy.experimental_distribute_dataset(val_dataset)

        @tf.function
        def train_step(x, y):
            return strategy.reduce("SUM", strategy.run(replica_train_step, args=(x, y)), axis=None)

        @tf.function
        def test_step(x, y):
            strategy.run(replica_test_step, args=(x, y))

    history = []
    for epoch in range(epochs):
        losses = []
        for step, (x_batch_train, y_batch_train) in enumerate(train_dataset):
            loss_value = train_step(x_batch_train, y_batch_train)
            losses.append(_r(loss_value))
        train_acc = train_acc_metric.result()
        train_acc_metric.reset_state()
        for x_batch_val, y_batch_val in val_dataset:
            test_step(x_batch_val, y_batch_val)
        val_acc = val_acc_metric.result()
        val_acc_metric.reset_state()
        history.append({"losses": losses, "train_acc": _r(train_acc), "val_acc": _r(val_acc),
                        "reset": _r(val_acc_metric.result())})
    return {"history": history, "kernel": _r(model.trainable_weights[-2].numpy(), 4),
            "n_losses": len(model.losses)}


def case_loop_from_scratch(tf):
    return _loop(tf)


def case_loop_from_scratch_two_replicas(tf):
    return _loop(tf, two_cpus(tf))


def case_loop_regularization_losses(tf):
    return _loop(tf, regularized=True)


def case_loop_regularization_losses_two_replicas(tf):
    return _loop(tf, two_cpus(tf), regularized=True)


def case_metric_state_api(tf):
    m = tf.keras.metrics.SparseCategoricalAccuracy()
    m.update_state(tf.constant([0, 1, 2]), tf.constant([[0.9, 0.1, 0.0], [0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]))
    first = _r(m.result())
    m.update_state(tf.constant([1]), tf.constant([[0.1, 0.8, 0.1]]))
    second = _r(m.result())
    m.reset_state()
    mean = tf.keras.metrics.Mean()
    mean(2.0)
    mean.update_state([4.0, 6.0], sample_weight=[1.0, 3.0])
    return [first, second, _r(m.result()), _r(mean.result())]


def _regression_data(tf, weighted=False):
    x, y = tf.constant(X), tf.constant(Y_REG)
    if weighted:
        return x, y, tf.constant([1.0 + (i % 3) for i in range(N)])
    return x, y


def _custom_fit_model(tf, keras):
    class CustomModel(keras.Model):
        def train_step(self, data):
            # Unpack the data. Its structure depends on your model and
            # on what you pass to `fit()`.
            x, y = data
            with tf.GradientTape() as tape:
                y_pred = self(x, training=True)  # Forward pass
                # Compute the loss value
                # (the loss function is configured in `compile()`)
                loss = self.compute_loss(y=y, y_pred=y_pred)
            # Compute gradients
            trainable_vars = self.trainable_variables
            gradients = tape.gradient(loss, trainable_vars)
            # Update weights
            self.optimizer.apply(gradients, trainable_vars)
            # Update metrics (includes the metric that tracks the loss)
            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
                else:
                    metric.update_state(y, y_pred)
            # Return a dict mapping metric names to current value
            return {m.name: m.result() for m in self.metrics}
    return CustomModel


def _fit(tf, strategy, build):
    keras = tf.keras
    with scope_of(strategy):
        model = build(keras)
    x, y = _regression_data(tf)
    history = model.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0)
    return {k: _r(v) for k, v in history.history.items()}


def _compute_loss_model(tf, keras):
    CustomModel = _custom_fit_model(tf, keras)
    inputs = keras.Input(shape=(6,))
    outputs = keras.layers.Dense(1)(inputs)
    model = _fix(CustomModel(inputs, outputs))
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse", metrics=["mae"])
    return model


def case_fit_compute_loss(tf):
    return _fit(tf, None, lambda keras: _compute_loss_model(tf, keras))


def _without_losses(history):
    """A two-replica history without the losses a custom step reported (Keras 3 on TensorFlow divides a
    loss computed in a replica by the replica count: ``*_reported_loss`` cases)."""
    return {k: v for k, v in history.items() if not k.endswith("loss")}


def case_fit_compute_loss_two_replicas(tf):
    return _without_losses(_fit(tf, two_cpus(tf), lambda keras: _compute_loss_model(tf, keras)))


def case_fit_compute_loss_two_replicas_reported_loss(tf):
    return _fit(tf, two_cpus(tf), lambda keras: _compute_loss_model(tf, keras))["loss"]


def _own_metrics_model(tf, keras):
    class CustomModel(keras.Model):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.loss_tracker = keras.metrics.Mean(name="loss")
            self.mae_metric = keras.metrics.MeanAbsoluteError(name="mae")
            self.loss_fn = keras.losses.MeanSquaredError()

        def train_step(self, data):
            x, y = data
            with tf.GradientTape() as tape:
                y_pred = self(x, training=True)  # Forward pass
                # Compute our own loss
                loss = self.loss_fn(y, y_pred)
            # Compute gradients
            trainable_vars = self.trainable_variables
            gradients = tape.gradient(loss, trainable_vars)
            # Update weights
            self.optimizer.apply(gradients, trainable_vars)
            # Compute our own metrics
            self.loss_tracker.update_state(loss)
            self.mae_metric.update_state(y, y_pred)
            return {"loss": self.loss_tracker.result(), "mae": self.mae_metric.result()}

        @property
        def metrics(self):
            # We list our `Metric` objects here so that `reset_states()` can be
            # called automatically at the start of each epoch
            # or at the start of `evaluate()`.
            return [self.loss_tracker, self.mae_metric]

    inputs = keras.Input(shape=(6,))
    outputs = keras.layers.Dense(1)(inputs)
    model = _fix(CustomModel(inputs, outputs))
    # We don't pass a loss or metrics here.
    model.compile(optimizer=keras.optimizers.Adam(0.05))
    return model


def case_fit_own_metrics(tf):
    return _fit(tf, None, lambda keras: _own_metrics_model(tf, keras))


def _weighted_model(tf, keras):
    class CustomModel(keras.Model):
        def train_step(self, data):
            # Unpack the data. Its structure depends on your model and
            # on what you pass to `fit()`.
            if len(data) == 3:
                x, y, sample_weight = data
            else:
                sample_weight = None
                x, y = data
            with tf.GradientTape() as tape:
                y_pred = self(x, training=True)  # Forward pass
                # Compute the loss value.
                # The loss function is configured in `compile()`.
                loss = self.compute_loss(y=y, y_pred=y_pred, sample_weight=sample_weight)
            # Compute gradients
            trainable_vars = self.trainable_variables
            gradients = tape.gradient(loss, trainable_vars)
            # Update weights
            self.optimizer.apply(gradients, trainable_vars)
            # Update the metrics.
            # Metrics are configured in `compile()`.
            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
                else:
                    metric.update_state(y, y_pred, sample_weight=sample_weight)
            # Return a dict mapping metric names to current value.
            # Note that it will include the loss (tracked in self.metrics).
            return {m.name: m.result() for m in self.metrics}

    inputs = keras.Input(shape=(6,))
    outputs = keras.layers.Dense(1)(inputs)
    model = _fix(CustomModel(inputs, outputs))
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse", metrics=["mae"])
    return model


def _fit_weighted(tf, strategy):
    with scope_of(strategy):
        model = _weighted_model(tf, tf.keras)
    x, y, sw = _regression_data(tf, weighted=True)
    history = model.fit(x, y, sample_weight=sw, epochs=2, batch_size=8, shuffle=False, verbose=0)
    return {k: _r(v) for k, v in history.history.items()}


def case_fit_sample_weight(tf):
    return _fit_weighted(tf, None)


def case_fit_sample_weight_two_replicas(tf):
    return _without_losses(_fit_weighted(tf, two_cpus(tf)))


def _evaluate(tf, strategy):
    keras = tf.keras

    class CustomModel(keras.Model):
        def test_step(self, data):
            # Unpack the data
            x, y = data
            # Compute predictions
            y_pred = self(x, training=False)
            # Updates the metrics tracking the loss
            loss = self.compute_loss(y=y, y_pred=y_pred)
            # Update the metrics.
            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
                else:
                    metric.update_state(y, y_pred)
            # Return a dict mapping metric names to current value.
            # Note that it will include the loss (tracked in self.metrics).
            return {m.name: m.result() for m in self.metrics}

    with scope_of(strategy):
        inputs = keras.Input(shape=(6,))
        outputs = keras.layers.Dense(1)(inputs)
        model = _fix(CustomModel(inputs, outputs))
        model.compile(loss="mse", metrics=["mae"])
    x, y = _regression_data(tf)
    return _r(model.evaluate(x, y, batch_size=8, verbose=0, return_dict=True))


def case_custom_test_step(tf):
    return _evaluate(tf, None)


def case_custom_test_step_two_replicas(tf):
    return _without_losses(_evaluate(tf, two_cpus(tf)))


def case_custom_test_step_two_replicas_reported_loss(tf):
    return _evaluate(tf, two_cpus(tf))["loss"]

