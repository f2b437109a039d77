"""keras.io's "Transfer learning & fine-tuning" (Keras 3, TF 2.21's ``tf.keras``), typed as printed with
``keras`` -> ``md.keras`` (``tf.keras`` on TensorFlow), shrunk, on one device and on a MirroredStrategy of
two: weight counts and ``trainable``, a frozen layer that ``fit`` leaves alone, ``trainable`` set
recursively, a frozen ``BatchNormalization`` in inference mode, and the typical workflow: a frozen
``base_model(inputs, training=False)`` under a new head, then unfrozen and recompiled for fine-tuning
(its BatchNormalization still in inference mode: its moving statistics never change).

Substitutions: ``keras.applications.Xception(weights="imagenet")`` is a small Conv2D + BatchNormalization
base whose weights (and moving statistics) are set to a fixed pattern; ``np.random.random`` data and the
cats-vs-dogs images are fixed tables; the head's ``Dropout(0.2)`` and the random augmentation are left
out (TensorFlow's and torch's generators differ); fine-tuning uses ``Adam(1e-3)`` (the guide's 1e-5 moves
the weights less than the observations' rounding).
"""

from conformance_support import fixed_weights, keras2, rounded, scope_of, two_cpus

X = [[((i * 5 + j * 3) % 7) / 7.0 - 0.3 for j in range(3)] for i in range(8)]
Y = [[((i * 2 + j) % 5) / 5.0 for j in range(3)] for i in range(8)]
IMAGES = [[[[float((i * 37 + r * 11 + c * 5 + ch * 3) % 256) for ch in range(2)] for c in range(6)] for r in range(6)]
          for i in range(16)]
LABELS = [float((i * 3) % 2) for i in range(16)]


def _counts(layer):
    return [len(layer.weights), len(layer.trainable_weights), len(layer.non_trainable_weights)]


def case_weight_counts_and_trainable(tf):
    keras = tf.keras
    layer = keras.layers.Dense(3)
    layer.build((None, 4))  # Create the weights
    dense = _counts(layer)
    layer = keras.layers.BatchNormalization()
    layer.build((None, 4))  # Create the weights
    bn = _counts(layer)
    layer = keras.layers.Dense(3)
    layer.build((None, 4))  # Create the weights
    layer.trainable = False  # Freeze the layer
    return [dense, bn, _counts(layer)]


def _frozen_layer(tf, strategy):
    keras = tf.keras
    with scope_of(strategy):
        # Make a model with 2 layers
        layer1 = keras.layers.Dense(3, activation="relu")
        layer2 = keras.layers.Dense(3, activation="sigmoid")
        model = keras.Sequential([keras.Input(shape=(3,)), layer1, layer2])
        fixed_weights(model, 0.8)
        # Freeze the first layer
        layer1.trainable = False
        # Keep a copy of the weights of layer1 for later reference
        initial_layer1_weights_values = layer1.get_weights()
        initial_layer2_weights_values = layer2.get_weights()
        # Train the model
        model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
    history = model.fit(tf.constant(X), tf.constant(Y), batch_size=4, epochs=2, shuffle=False, verbose=0)
    # Check that the weights of layer1 have not changed during training
    final_layer1_weights_values = layer1.get_weights()
    return {"layer1_unchanged": all(bool((a == b).all()) for a, b in zip(initial_layer1_weights_values,
                                                                          final_layer1_weights_values)),
            "layer2_changed": any(bool((a != b).any()) for a, b in zip(initial_layer2_weights_values,
                                                                       layer2.get_weights())),
            "loss": rounded(history.history["loss"]), "layer2": rounded(layer2.get_weights(), 4)}


def case_frozen_layer_left_alone_by_fit(tf):
    return _frozen_layer(tf, None)


def case_frozen_layer_left_alone_by_fit_two_replicas(tf):
    return _frozen_layer(tf, two_cpus(tf))


def case_trainable_is_recursive(tf):
    keras = tf.keras
    inner_model = keras.Sequential(
        [
            keras.Input(shape=(3,)),
            keras.layers.Dense(3, activation="relu"),
            keras.layers.Dense(3, activation="relu"),
        ]
    )
    model = keras.Sequential(
        [
            keras.Input(shape=(3,)),
            inner_model,
            keras.layers.Dense(3, activation="sigmoid"),
        ]
    )
    model.trainable = False  # Freeze the outer model
    frozen = [inner_model.trainable, inner_model.layers[0].trainable, len(model.trainable_weights),
              len(model.non_trainable_weights)]
    inner_model.trainable = True   # unfreezing the inner model alone
    return [frozen, [model.trainable, inner_model.layers[1].trainable, len(model.trainable_weights)]]


def case_frozen_batchnorm_runs_in_inference_mode(tf):
    keras = tf.keras
    bn = keras.layers.BatchNormalization()
    bn.build((None, 3))
    bn.set_weights([tf.constant([1.5, 0.5, 1.0]), tf.constant([0.1, -0.2, 0.3]),
                    tf.constant([0.2, -0.1, 0.05]), tf.constant([0.5, 2.0, 1.0])])
    x = tf.constant(X)
    trained = rounded(bn(x, training=True)[0])
    moved = rounded(bn.moving_mean.numpy())
    bn.trainable = False
    frozen_training = rounded(bn(x, training=True)[0])
    return [trained, moved, frozen_training, rounded(bn(x, training=False)[0]), rounded(bn.moving_mean.numpy())]


def _base_model(keras):
    """The stand-in for ``keras.applications.Xception(weights="imagenet", include_top=False)``."""
    base_model = keras.Sequential([keras.Input(shape=(6, 6, 2)), keras.layers.Conv2D(4, 3),
                                   keras.layers.BatchNormalization(), keras.layers.ReLU()], name="base")
    fixed_weights(base_model, 0.4)
    bn = base_model.layers[1]
    gamma, beta, mean, variance = bn.get_weights()
    bn.set_weights([gamma + 1.0, beta, mean, abs(variance) + 0.5])   # a positive variance, as trained
    return base_model


def _workflow(tf, strategy, keras=None, freeze_batchnorm=False):
    keras = keras or tf.keras
    dataset = tf.data.Dataset.from_tensor_slices((tf.constant(IMAGES), tf.constant(LABELS)))
    train_ds, validation_ds = dataset.take(12).batch(4), dataset.skip(12).batch(4)
    with scope_of(strategy):
        base_model = _base_model(keras)
        # Freeze the base_model
        base_model.trainable = False
        # Create new model on top
        inputs = keras.Input(shape=(6, 6, 2))
        # Pre-trained Xception weights requires that input be scaled
        # from (0, 255) to a range of (-1., +1.), the rescaling layer
        # outputs: `(inputs * scale) + offset`
        scale_layer = keras.layers.Rescaling(scale=1 / 127.5, offset=-1)
        x = scale_layer(inputs)
        # The base model contains batchnorm layers. We want to keep them in inference mode
        # when we unfreeze the base model for fine-tuning, so we make sure that the
        # base_model is running in inference mode here.
        x = base_model(x, training=False)
        x = keras.layers.GlobalAveragePooling2D()(x)
        outputs = keras.layers.Dense(1)(x)
        model = keras.Model(inputs, outputs)
        model.layers[-1].set_weights([tf.constant([[0.3], [-0.2], [0.25], [-0.1]]), tf.constant([0.05])])
        model.summary(show_trainable=True, print_fn=lambda *args, **kwargs: None)
        model.compile(
            optimizer=keras.optimizers.Adam(),
            loss=keras.losses.BinaryCrossentropy(from_logits=True),
            metrics=[keras.metrics.BinaryAccuracy()],
        )
    frozen_counts = [len(model.trainable_weights), len(model.non_trainable_weights)]
    base_before = base_model.get_weights()
    epochs = 2
    head = model.fit(train_ds, epochs=epochs, validation_data=validation_ds, verbose=0)
    frozen_base_unchanged = all(bool((a == b).all()) for a, b in zip(base_before, base_model.get_weights()))
    # Unfreeze the base_model. Note that it keeps running in inference mode
    # since we passed `training=False` when calling it. This means that
    # the batchnorm layers will not update their batch statistics.
    # This prevents the batchnorm layers from undoing all the training
    # we've done so far.
    base_model.trainable = True
    if freeze_batchnorm:   # the guide's advice since keras-team/keras#20298: frozen BatchNormalization layers
        for layer in base_model.layers:
            if isinstance(layer, keras.layers.BatchNormalization):
                layer.trainable = False
    model.summary(show_trainable=True, print_fn=lambda *args, **kwargs: None)
    with scope_of(strategy):
        model.compile(
            optimizer=keras.optimizers.Adam(1e-3),  # Low learning rate (the guide's 1e-5)
            loss=keras.losses.BinaryCrossentropy(from_logits=True),
            metrics=[keras.metrics.BinaryAccuracy()],
        )
    unfrozen_counts = [len(model.trainable_weights), len(model.non_trainable_weights)]
    fine = model.fit(train_ds, epochs=epochs, validation_data=validation_ds, verbose=0)
    gamma, beta, moving_mean, moving_variance = base_model.layers[1].get_weights()
    return {"counts": [frozen_counts, unfrozen_counts], "frozen_base_unchanged": frozen_base_unchanged,
            "head_history": rounded(head.history), "fine_tune_history": rounded(fine.history),
            "moving_stats_unchanged": bool((moving_mean == base_before[4]).all()
                                           and (moving_variance == base_before[5]).all()),
            "moving_mean": rounded(moving_mean, 4),
            "gamma_beta": rounded([gamma, beta], 4), "conv_bias": rounded(base_model.layers[0].get_weights()[1], 4),
            "evaluate": rounded(model.evaluate(validation_ds, verbose=0))}


def case_typical_workflow_then_fine_tuning(tf):
    return _workflow(tf, None)


def case_typical_workflow_then_fine_tuning_two_replicas(tf):
    return _workflow(tf, two_cpus(tf))


def case_typical_workflow_tf_keras2(tf):
    """The guide as tf.keras 2 runs it (``tf_keras`` on TensorFlow): the base model called with
    ``training=False`` stays in inference mode after unfreezing, as the guide says."""
    return _workflow(tf, None, keras2(tf))


def case_typical_workflow_tf_keras2_two_replicas(tf):
    return _workflow(tf, two_cpus(tf), keras2(tf))


def case_fine_tuning_with_frozen_batchnorm(tf):
    """The guide's advice since keras-team/keras#20298: set the BatchNormalization layers' ``trainable = False``
    after unfreezing the base model (Keras 3 and tf.keras 2 agree: inference mode, moving statistics kept)."""
    return _workflow(tf, None, freeze_batchnorm=True)


def case_fine_tuning_with_frozen_batchnorm_two_replicas(tf):
    return _workflow(tf, two_cpus(tf), freeze_batchnorm=True)
