"""Custom training loops as TensorFlow's "Custom training with tf.distribute.Strategy" tutorial writes
them: ``GradientTape`` + ``apply_gradients`` in ``strategy.run`` inside a ``tf.function`` step,
``compute_average_loss`` (with and without ``sample_weight``), ``scale_regularization_loss``,
losses summed across steps, on two replicas and on one (every case returns the per-step losses, the
epoch losses and the trained weights)."""

from conformance_support import loop_dataset, loop_model, loop_replica_step, one_cpu, two_cpus, val, weights

GLOBAL_BATCH = 4


def _optimizer(tf, kind):
    if kind == "adam":
        return tf.keras.optimizers.Adam(learning_rate=0.05)
    return tf.keras.optimizers.SGD(learning_rate=0.2, momentum=0.9)


def _train(tf, s, kind="sgd", epochs=2, weighted=False, l2=0.0, compiled=True, counter="int", build=True):
    """The tutorial's loop: per-step losses, epoch mean losses, final weights.

    ``build``: the optimizer makes its slots in the scope first. TF 2.21 fails when a Keras
    optimizer's slots are first made inside a ``tf.function`` on a MirroredStrategy ("You must feed
    a value for placeholder tensor"), so TF's numbers are recorded with the slots built first."""
    with s.scope():
        model = loop_model(tf, l2)
        optimizer = _optimizer(tf, kind)
        if build:
            optimizer.build(model.trainable_variables)
        loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    def train_step(inputs):
        x, y = inputs[0], inputs[1]
        with tf.GradientTape() as tape:
            per_example_loss = loss_object(y, model(x, training=True))
            if weighted:
                loss = tf.nn.compute_average_loss(per_example_loss, sample_weight=inputs[2],
                                                  global_batch_size=GLOBAL_BATCH)
            else:
                loss = tf.nn.compute_average_loss(per_example_loss, global_batch_size=GLOBAL_BATCH)
            if l2:
                loss += tf.nn.scale_regularization_loss(model.losses)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    def distributed_train_step(inputs):
        per_replica_losses = s.run(train_step, args=(inputs,))
        return s.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)
    if compiled:
        distributed_train_step = tf.function(distributed_train_step)

    dist = s.experimental_distribute_dataset(loop_dataset(tf, GLOBAL_BATCH, weighted))
    steps, epoch_losses = [], []
    for _ in range(epochs):
        total_loss = 0.0
        num_batches = 0 if counter == "int" else tf.Variable(0.0)
        for batch in dist:
            step_loss = distributed_train_step(batch)
            steps.append(val(step_loss))
            total_loss += step_loss
            if counter == "assign_add":
                num_batches.assign_add(1.0)
            else:
                num_batches += 1
        epoch_losses.append(val(total_loss / num_batches))
    return {"steps": steps, "epochs": epoch_losses, "weights": weights(model)}


def case_sgd_momentum_two_replicas(tf):
    return _train(tf, two_cpus(tf))


def case_slots_made_in_function(tf):
    """TF 2.21 fails (see ``_train``); multidev gives the result of ``sgd_momentum_two_replicas``."""
    return _train(tf, two_cpus(tf), build=False)


def case_slots_made_in_eager_steps(tf):
    return _train(tf, two_cpus(tf), build=False, compiled=False, epochs=1)


def case_sgd_momentum_one_replica(tf):
    return _train(tf, one_cpu(tf))


def case_adam_two_replicas(tf):
    return _train(tf, two_cpus(tf), "adam")


def case_adam_one_replica(tf):
    return _train(tf, one_cpu(tf), "adam")


def case_sample_weight_two_replicas(tf):
    return _train(tf, two_cpus(tf), weighted=True, epochs=1)


def case_sample_weight_one_replica(tf):
    return _train(tf, one_cpu(tf), weighted=True, epochs=1)


def case_regularization_two_replicas(tf):
    return _train(tf, two_cpus(tf), "adam", l2=0.01, epochs=1)


def case_regularization_one_replica(tf):
    return _train(tf, one_cpu(tf), "adam", l2=0.01, epochs=1)


def case_eager_steps_two_replicas(tf):
    return _train(tf, two_cpus(tf), compiled=False, epochs=1)


def case_counter_variable_plus_equals(tf):
    return _train(tf, two_cpus(tf), epochs=1, counter="plus_equals")


def case_counter_variable_assign_add(tf):
    return _train(tf, two_cpus(tf), epochs=1, counter="assign_add")


def case_model_losses_in_replicas(tf):
    s = two_cpus(tf)
    with s.scope():
        model = loop_model(tf, 0.01)

    def step(x):
        model(x)
        return tf.nn.scale_regularization_loss(model.losses)
    dist = s.experimental_distribute_dataset(loop_dataset(tf, GLOBAL_BATCH))
    x, _ = next(iter(dist))
    out = s.run(step, args=(x,))
    return [val(v) for v in s.experimental_local_results(out)]


def case_loss_accumulated_in_replica(tf):
    """Two forward passes' losses summed inside one replica step with ``loss +=``, then one update."""
    s = two_cpus(tf)
    with s.scope():
        model = loop_model(tf)
        optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)

    @tf.function
    def step(x, y):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                loss = 0.0
                for scale in (1.0, 2.0):
                    per_example = tf.reduce_sum((model(x * scale) - tf.cast(y[:, None], tf.float32)) ** 2, axis=1)
                    loss += tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        return s.reduce("SUM", s.run(replica_fn, args=(x, y)), axis=None)
    losses = [val(step(x, y)) for x, y in s.experimental_distribute_dataset(loop_dataset(tf, GLOBAL_BATCH))]
    return {"steps": losses, "weights": weights(model)}


def case_steps_in_function_from_iterator(tf):
    """The "Distributed input" tutorial's ``train_steps(iterator)``: several steps per function call."""
    s = two_cpus(tf)
    with s.scope():
        model = loop_model(tf)
        optimizer = tf.keras.optimizers.SGD(learning_rate=0.1, momentum=0.5)
        optimizer.build(model.trainable_variables)
    replica_fn = loop_replica_step(tf, model, optimizer, GLOBAL_BATCH)

    @tf.function
    def train_steps(iterator, steps):
        total = 0.0
        for _ in range(steps):
            total += s.reduce("SUM", s.run(replica_fn, args=next(iterator)), axis=None)
        return total
    iterator = iter(s.experimental_distribute_dataset(loop_dataset(tf, 2).repeat()))
    return {"totals": [val(train_steps(iterator, 2)), val(train_steps(iterator, 3))], "weights": weights(model)}
