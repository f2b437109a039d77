"""Guide "Migrate single-worker multiple-GPU training" (guide/migrate/mirrored_strategy), TF2 half.

Keras ``fit``/``evaluate`` in ``MirroredStrategy.scope()`` on the guide's three examples, and the
custom loop the guide points to ("Using tf.distribute.Strategy with custom training loops":
``experimental_distribute_dataset``, ``strategy.run``, ``strategy.reduce``) on the same data.
Substitutions (the same on both sides): the strategy's devices named (``strategy(r)``), the model
built with ``model.build((None, 2))`` and its weights set from a fixed pattern, 3 epochs; the loop's loss
is the custom-training tutorial's ``MeanSquaredError(reduction='none')`` (Keras 3, TF 2.21's tf.keras, has no
``losses.mean_squared_error``) averaged over the global batch of 1.
"""

from _common import deterministic, history, rnd, strategy, tf, weights

features = [[1., 1.5], [2., 2.5], [3., 3.5]]
labels = [[0.3], [0.5], [0.7]]
eval_features = [[4., 4.5], [5., 5.5], [6., 6.5]]
eval_labels = [[0.8], [0.9], [1.]]


def _datasets():
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(1)
    eval_dataset = tf.data.Dataset.from_tensor_slices(
        (eval_features, eval_labels)).batch(1)
    return dataset, eval_dataset


def mirrored_default_devices(r):
    """The printed ``MirroredStrategy()`` on a machine with no GPU: how many replicas it makes."""
    return tf.distribute.MirroredStrategy().num_replicas_in_sync


def mirrored_keras_fit(r):
    dataset, eval_dataset = _datasets()
    strategy_ = strategy(r)
    with strategy_.scope():
        model = tf.keras.models.Sequential([tf.keras.layers.Dense(1)])
        optimizer = tf.keras.optimizers.Adagrad(learning_rate=0.05)
        model.build((None, 2))
        deterministic(model)

    model.compile(optimizer=optimizer, loss='mse')
    h = model.fit(dataset, epochs=3, verbose=0)
    result = model.evaluate(eval_dataset, return_dict=True, verbose=0)
    return {"h": history(h), "eval": {k: round(float(v), 5) for k, v in result.items()}, "w": weights(model)}


def mirrored_custom_loop(r):
    dataset, _ = _datasets()
    mirrored_strategy = strategy(r)
    with mirrored_strategy.scope():
        model = tf.keras.models.Sequential([tf.keras.layers.Dense(1)])
        optimizer = tf.keras.optimizers.Adagrad(learning_rate=0.05)
        model.build((None, 2))
        deterministic(model)
        loss_object = tf.keras.losses.MeanSquaredError(reduction='none')
        optimizer.build(model.trainable_variables)   # TF 2.21 fails slots made inside tf.function on 2 replicas
    dist_dataset = mirrored_strategy.experimental_distribute_dataset(dataset)

    @tf.function
    def train_step(dist_inputs):
        def step_fn(inputs):
            features, labels = inputs
            with tf.GradientTape() as tape:
                logits = model(features, training=True)
                per_example_loss = loss_object(labels, logits)
                loss = tf.nn.compute_average_loss(per_example_loss, global_batch_size=1)
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables))
            return loss

        per_replica_losses = mirrored_strategy.run(step_fn, args=(dist_inputs,))
        return mirrored_strategy.reduce(tf.distribute.ReduceOp.SUM,
                                        per_replica_losses, axis=None)

    losses = []
    for _ in range(3):
        for dist_inputs in dist_dataset:
            losses.append(rnd(train_step(dist_inputs)))
    return {"losses": losses, "w": weights(model)}


SNIPPETS = [mirrored_default_devices, mirrored_keras_fit, mirrored_custom_loop]
