"""Distributed input (TensorFlow's input_lib_test, strategy_common_test, the distributed input guide)."""

from conformance_support import local, raises, replica_id, two_cpus, val


def _steps(s, dist):
    return [local(s, batch) for batch in dist]


def _split(tf, dataset):
    """Each step's per-replica slices of ``dataset`` distributed over the two replicas."""
    s = two_cpus(tf)
    return _steps(s, s.experimental_distribute_dataset(dataset))


def case_even_batches(tf):
    return _split(tf, tf.data.Dataset.range(8).batch(4))


def case_partial_last_batch(tf):
    return _split(tf, tf.data.Dataset.range(6).batch(4))


def case_last_batch_of_one(tf):
    return _split(tf, tf.data.Dataset.range(5).batch(4))


def case_odd_global_batch(tf):
    return _split(tf, tf.data.Dataset.range(6).batch(3))


def case_drop_remainder(tf):
    return _split(tf, tf.data.Dataset.range(10).batch(4, drop_remainder=True))


def case_tuple_elements(tf):
    s = two_cpus(tf)
    data = tf.data.Dataset.from_tensor_slices(([1.0, 2.0, 3.0, 4.0], [10, 20, 30, 40])).batch(4)
    x, y = next(iter(s.experimental_distribute_dataset(data)))
    return [local(s, x), local(s, y)]


def case_dict_elements(tf):
    s = two_cpus(tf)
    data = tf.data.Dataset.from_tensor_slices({"a": [1.0, 2.0], "b": [3.0, 4.0]}).batch(2)
    batch = next(iter(s.experimental_distribute_dataset(data)))
    return [sorted(batch), local(s, batch["a"]), local(s, batch["b"])]


def case_mapped_dataset(tf):
    s = two_cpus(tf)
    data = tf.data.Dataset.range(4).map(lambda x: x * 2).batch(4)
    return _steps(s, s.experimental_distribute_dataset(data))


def case_iterate_twice(tf):
    s = two_cpus(tf)
    dist = s.experimental_distribute_dataset(tf.data.Dataset.range(4).batch(2))
    return [_steps(s, dist), _steps(s, dist)]


def case_per_replica_type(tf):
    s = two_cpus(tf)
    return type(next(iter(s.experimental_distribute_dataset(tf.data.Dataset.range(4).batch(4))))).__name__


def case_get_next_past_end(tf):
    s = two_cpus(tf)
    it = iter(s.experimental_distribute_dataset(tf.data.Dataset.range(2).batch(2)))
    it.get_next()
    return it.get_next()


def case_next_past_end(tf):
    s = two_cpus(tf)
    it = iter(s.experimental_distribute_dataset(tf.data.Dataset.range(2).batch(2)))
    next(it)
    return next(it)


def case_get_next_as_optional(tf):
    s = two_cpus(tf)
    it = iter(s.experimental_distribute_dataset(tf.data.Dataset.range(2).batch(2)))
    first = it.get_next_as_optional()
    out = [bool(first.has_value()), local(s, first.get_value())]
    return out + [bool(it.get_next_as_optional().has_value())]


def case_past_end_inside_function(tf):
    s = two_cpus(tf)
    it = iter(s.experimental_distribute_dataset(tf.data.Dataset.range(2).batch(2)))

    @tf.function
    def step(iterator):
        return s.run(lambda x: x * 2, args=(next(iterator),))
    step(it)
    return step(it)


def case_step_in_function(tf):
    s = two_cpus(tf)
    it = iter(s.experimental_distribute_dataset(tf.data.Dataset.range(4).batch(4)))

    @tf.function
    def step(iterator):
        return s.run(lambda x: x + 1, args=(next(iterator),))
    return local(s, step(it))


def case_run_on_batches(tf):
    s = two_cpus(tf)
    dist = s.experimental_distribute_dataset(tf.data.Dataset.range(8).batch(4))
    totals = [val(s.reduce("SUM", s.run(lambda x: tf.reduce_sum(x)), axis=None)) for x in dist]
    return totals


def case_datasets_from_function_batched(tf):
    s = two_cpus(tf)

    def dataset_fn(ctx):
        return tf.data.Dataset.range(8).batch(ctx.get_per_replica_batch_size(4))
    return _steps(s, s.distribute_datasets_from_function(dataset_fn))


def case_datasets_from_function_unbatched(tf):
    s = two_cpus(tf)
    dist = s.distribute_datasets_from_function(lambda ctx: tf.data.Dataset.range(10))
    return _steps(s, dist)


def case_datasets_from_function_context(tf):
    s = two_cpus(tf)
    seen = []

    def dataset_fn(ctx):
        seen.append([ctx.num_input_pipelines, ctx.input_pipeline_id, ctx.num_replicas_in_sync,
                     ctx.get_per_replica_batch_size(8)])
        return tf.data.Dataset.range(4).batch(2)
    next(iter(s.distribute_datasets_from_function(dataset_fn)))
    return seen


def case_per_replica_batch_size_uneven(tf):
    return raises(tf.distribute.InputContext(1, 0, 2).get_per_replica_batch_size, 5)


def case_input_context_str(tf):
    ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=4)
    return str(ctx).replace("md.", "tf.")


def case_input_context_defaults(tf):
    ctx = tf.distribute.InputContext()
    return [ctx.num_input_pipelines, ctx.input_pipeline_id, ctx.num_replicas_in_sync]


def case_input_options_defaults(tf):
    options = tf.distribute.InputOptions()
    return [options.experimental_fetch_to_device, options.experimental_replication_mode.name,
            options.experimental_place_dataset_on_device, options.experimental_per_replica_buffer_size]


def case_per_replica_mode_with_distribute_dataset(tf):
    s = two_cpus(tf)
    options = tf.distribute.InputOptions(experimental_replication_mode=tf.distribute.InputReplicationMode.PER_REPLICA)
    return raises(s.experimental_distribute_dataset, tf.data.Dataset.range(4).batch(2), options)


def case_batch_of_matrices(tf):
    s = two_cpus(tf)
    data = tf.data.Dataset.from_tensor_slices([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]).batch(4)
    return _steps(s, s.experimental_distribute_dataset(data))


def case_global_batch_in_replicas(tf):
    s = two_cpus(tf)
    dist = s.experimental_distribute_dataset(tf.data.Dataset.range(6).batch(6))
    return [local(s, s.run(lambda x: tf.constant(float(len(x)) + replica_id(tf) * 0))) for x in dist]


def case_values_from_function_tuple(tf):
    s = two_cpus(tf)
    out = s.experimental_distribute_values_from_function(
        lambda ctx: (tf.constant(float(ctx.replica_id_in_sync_group)), tf.constant(1.0)))
    return [type(out).__name__, [type(v).__name__ for v in out] if isinstance(out, tuple) else None]


def case_datasets_from_function_unbatched_odd(tf):
    s = two_cpus(tf)
    return [len(local(s, batch)) for batch in s.distribute_datasets_from_function(lambda ctx: tf.data.Dataset.range(5))]


def case_datasets_from_function_per_replica_mode(tf):
    s = two_cpus(tf)
    options = tf.distribute.InputOptions(experimental_replication_mode=tf.distribute.InputReplicationMode.PER_REPLICA)

    def dataset_fn(ctx):
        return tf.data.Dataset.range(4).shard(ctx.num_input_pipelines, ctx.input_pipeline_id).batch(1)
    return _steps(s, s.distribute_datasets_from_function(dataset_fn, options))
