"""Keras metrics in a custom loop ("Custom training with tf.distribute.Strategy"): created in the
scope, ``update_state`` inside the replicas, ``result()`` and ``reset_state()`` in the epoch loop."""

from conformance_support import loop_dataset, loop_model, one_cpu, two_cpus, val, weights

GLOBAL_BATCH = 4


def _epochs(tf, s, epochs=2, reset=True):
    """Training with train/test metrics; each epoch's results (read outside the replicas)."""
    with s.scope():
        model = loop_model(tf)
        optimizer = tf.keras.optimizers.SGD(learning_rate=0.5)
        loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
        test_loss = tf.keras.metrics.Mean(name="test_loss")
        train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="train_accuracy")
        test_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="test_accuracy")

    def train_step(inputs):
        x, y = inputs
        with tf.GradientTape() as tape:
            predictions = model(x, training=True)
            loss = tf.nn.compute_average_loss(loss_object(y, predictions), global_batch_size=GLOBAL_BATCH)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        train_accuracy.update_state(y, predictions)
        return loss

    def test_step(inputs):
        x, y = inputs
        predictions = model(x, training=False)
        test_loss.update_state(loss_object(y, predictions))
        test_accuracy.update_state(y, predictions)

    @tf.function
    def distributed_train_step(inputs):
        return s.reduce("SUM", s.run(train_step, args=(inputs,)), axis=None)

    @tf.function
    def distributed_test_step(inputs):
        return s.run(test_step, args=(inputs,))

    dist = s.experimental_distribute_dataset(loop_dataset(tf, GLOBAL_BATCH))
    history = []
    for _ in range(epochs):
        total_loss, num_batches = 0.0, 0
        for batch in dist:
            total_loss += distributed_train_step(batch)
            num_batches += 1
        for batch in dist:
            distributed_test_step(batch)
        history.append([val(total_loss / num_batches), val(test_loss.result()), val(train_accuracy.result()),
                         val(test_accuracy.result())])
        if reset:
            for metric in (test_loss, train_accuracy, test_accuracy):
                metric.reset_state()
    return {"history": history, "weights": weights(model)}


def case_tutorial_epochs_two_replicas(tf):
    return _epochs(tf, two_cpus(tf))


def case_tutorial_epochs_one_replica(tf):
    return _epochs(tf, one_cpu(tf))


def case_without_reset(tf):
    return _epochs(tf, two_cpus(tf), reset=False)["history"]


def case_result_inside_replicas(tf):
    """``result()`` read inside a replica sees that replica's part (a sync-on-read read)."""
    s = two_cpus(tf)
    with s.scope():
        mean = tf.keras.metrics.Mean()

    def replica_fn(x):
        mean.update_state(x)
        return mean.result()
    dist = s.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(tf.constant([1.0, 2.0, 3.0, 10.0])).batch(4))
    out = [s.run(replica_fn, args=(x,)) for x in dist]
    return [[val(v) for v in s.experimental_local_results(o)] for o in out] + [val(mean.result())]


def case_update_outside_then_inside(tf):
    s = two_cpus(tf)
    with s.scope():
        mean = tf.keras.metrics.Mean()
    mean.update_state(tf.constant([4.0, 6.0]))
    s.run(lambda: mean.update_state(tf.constant([1.0])))
    return val(mean.result())


def case_sample_weight_in_replicas(tf):
    s = two_cpus(tf)
    with s.scope():
        accuracy = tf.keras.metrics.SparseCategoricalAccuracy()
        mean = tf.keras.metrics.Mean()
    dist = s.experimental_distribute_dataset(loop_dataset(tf, GLOBAL_BATCH, weighted=True))
    with s.scope():
        model = loop_model(tf)

    def replica_fn(x, y, w):
        predictions = model(x)
        accuracy.update_state(y, predictions, sample_weight=w)
        mean.update_state(tf.reduce_max(predictions, axis=1), sample_weight=w)
    for x, y, w in dist:
        s.run(replica_fn, args=(x, y, w))
    return [val(accuracy.result()), val(mean.result())]


def case_metric_variables(tf):
    s = two_cpus(tf)
    with s.scope():
        accuracy = tf.keras.metrics.SparseCategoricalAccuracy()
    s.run(lambda: accuracy.update_state(tf.constant([1, 0]), tf.constant([[0.1, 0.9], [0.2, 0.8]])))
    return [len(accuracy.variables), sorted(val(v.numpy()) for v in accuracy.variables)]
