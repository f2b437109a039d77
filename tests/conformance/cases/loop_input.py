"""Distributed input as TensorFlow's "Distributed input" tutorial writes it: partial and dropped last
batches, ``distribute_datasets_from_function`` with ``get_per_replica_batch_size`` and ``shard``,
``iter``/``next``/``get_next_as_optional``, two epochs, ``element_spec``, auto-shard options and
``experimental_distribute_values_from_function``, fed to a training step."""

from conformance_support import (LOOP_X, LOOP_Y, local, loop_dataset, loop_model, loop_replica_step, two_cpus, val,
                                 weights)

GLOBAL_BATCH = 4


def _train_on(tf, s, dist, epochs=1):
    """Plain-SGD steps of the loop model over ``dist``: each step's summed loss, the final weights."""
    with s.scope():
        model = loop_model(tf)
        optimizer = tf.keras.optimizers.SGD(learning_rate=0.3)
    replica_fn = loop_replica_step(tf, model, optimizer, GLOBAL_BATCH)

    @tf.function
    def step(x, y):
        return s.reduce("SUM", s.run(replica_fn, args=(x, y)), axis=None)
    losses = [[val(step(x, y)) for x, y in dist] for _ in range(epochs)]
    return {"steps": losses, "weights": weights(model)}


def case_partial_last_batch_training(tf):
    s = two_cpus(tf)
    dist = s.experimental_distribute_dataset(loop_dataset(tf, GLOBAL_BATCH))
    return [[local(s, y) for _, y in dist], _train_on(tf, s, dist, epochs=2)]


def case_drop_remainder_training(tf):
    s = two_cpus(tf)
    dist = s.experimental_distribute_dataset(loop_dataset(tf, GLOBAL_BATCH, drop_remainder=True))
    return [[local(s, y) for _, y in dist], _train_on(tf, s, dist, epochs=2)]


def _from_function(tf, s):
    def dataset_fn(input_context):
        batch_size = input_context.get_per_replica_batch_size(GLOBAL_BATCH)
        dataset = tf.data.Dataset.from_tensor_slices((tf.constant(LOOP_X), tf.constant(LOOP_Y)))
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        return dataset.batch(batch_size).prefetch(2)
    return s.distribute_datasets_from_function(dataset_fn)


def case_datasets_from_function_batches(tf):
    s = two_cpus(tf)
    return [local(s, y) for _, y in _from_function(tf, s)]


def case_datasets_from_function_training(tf):
    s = two_cpus(tf)
    return _train_on(tf, s, _from_function(tf, s), epochs=2)


def case_iter_next_then_loop(tf):
    """``next(iterator)`` twice, then ``for`` over the same iterator for the rest."""
    s = two_cpus(tf)
    iterator = iter(s.experimental_distribute_dataset(loop_dataset(tf, 3)))
    first = [local(s, next(iterator)[1]), local(s, next(iterator)[1])]
    return [first, [local(s, y) for _, y in iterator]]


def case_get_next_as_optional_loop(tf):
    """The tutorial's ``while True: optional = iterator.get_next_as_optional(); if not
    optional.has_value(): break``."""
    s = two_cpus(tf)
    iterator = iter(s.experimental_distribute_dataset(loop_dataset(tf, GLOBAL_BATCH)))
    seen = []
    while True:
        optional = iterator.get_next_as_optional()
        if not optional.has_value():
            break
        _, y = optional.get_value()
        seen.append(local(s, y))
    return seen


def case_get_next_as_optional_in_function(tf):
    s = two_cpus(tf)
    iterator = iter(s.experimental_distribute_dataset(loop_dataset(tf, GLOBAL_BATCH)))

    @tf.function
    def take(iterator):
        optional = iterator.get_next_as_optional()
        return optional.has_value()
    return [bool(take(iterator)) for _ in range(4)]


def case_two_epochs_same_batches(tf):
    s = two_cpus(tf)
    dist = s.experimental_distribute_dataset(loop_dataset(tf, GLOBAL_BATCH).shuffle(10, seed=3,
                                                                                    reshuffle_each_iteration=False))
    epochs = [[sorted(sum(local(s, y), [])) for _, y in dist] for _ in range(2)]
    return [epochs[0] == epochs[1], [len(e) for e in epochs]]


def case_element_spec(tf):
    s = two_cpus(tf)
    dist = s.experimental_distribute_dataset(loop_dataset(tf, GLOBAL_BATCH))
    spec = dist.element_spec
    return [type(spec).__name__, len(spec), [type(leaf).__name__ for leaf in spec],
            spec == iter(dist).element_spec]


def case_element_spec_as_input_signature(tf):
    """The tutorial passes ``dist_dataset.element_spec`` as a ``tf.function`` input signature."""
    s = two_cpus(tf)
    dist = s.experimental_distribute_dataset(loop_dataset(tf, GLOBAL_BATCH))

    @tf.function(input_signature=[dist.element_spec])
    def step(inputs):
        x, _ = inputs
        return s.reduce("SUM", s.run(lambda t: tf.reduce_sum(t), args=(x,)), axis=None)
    return [val(step(batch)) for batch in dist]


def _auto_shard(tf, policy):
    s = two_cpus(tf)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = getattr(tf.data.experimental.AutoShardPolicy, policy)
    dataset = loop_dataset(tf, GLOBAL_BATCH).with_options(options)
    return [local(s, y) for _, y in s.experimental_distribute_dataset(dataset)]


def case_auto_shard_data(tf):
    return _auto_shard(tf, "DATA")


def case_auto_shard_off(tf):
    return _auto_shard(tf, "OFF")


def case_auto_shard_policy_names(tf):
    policy = tf.data.experimental.AutoShardPolicy
    return [[p.name, int(p.value)] for p in (policy.AUTO, policy.FILE, policy.DATA, policy.OFF, policy.HINT)]


def case_values_from_function_in_step(tf):
    """Per-replica inputs made by ``experimental_distribute_values_from_function`` fed to ``run``."""
    s = two_cpus(tf)

    def value_fn(ctx):
        return tf.constant([float(ctx.replica_id_in_sync_group) + 1.0, 10.0])
    values = s.experimental_distribute_values_from_function(value_fn)
    out = s.run(lambda v: tf.reduce_sum(v * v), args=(values,))
    return [local(s, values), local(s, out), val(s.reduce("SUM", out, axis=None))]


def case_values_from_function_batches(tf):
    """The tutorial's per-replica slicing of a global batch by ``replica_id_in_sync_group``."""
    s = two_cpus(tf)
    per_replica = GLOBAL_BATCH // s.num_replicas_in_sync

    def value_fn(ctx):
        start = ctx.replica_id_in_sync_group * per_replica
        return tf.constant(LOOP_X[start:start + per_replica])
    x = s.experimental_distribute_values_from_function(value_fn)
    return [local(s, x), val(s.reduce("SUM", s.run(lambda t: tf.reduce_sum(t, axis=0), args=(x,)), axis=0))]


def case_auto_shard_off_uneven_partial(tf):
    """With auto-sharding OFF (or FILE, HINT) TF 2.21 fills the replicas of a partial batch in order
    ([4, 1] of 5 rows); AUTO and DATA spread it ([3, 2])."""
    s = two_cpus(tf)
    sizes = []
    for policy in ("OFF", "HINT", "AUTO"):
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = getattr(tf.data.experimental.AutoShardPolicy, policy)
        dataset = tf.data.Dataset.range(13).batch(8).with_options(options)
        sizes.append([[len(v) for v in s.experimental_local_results(x)] for x in s.experimental_distribute_dataset(dataset)])
    return sizes
