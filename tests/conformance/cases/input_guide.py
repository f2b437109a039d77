"""TensorFlow's "Distributed input" guide, section by section, beyond cases/input.py: dtypes of
elements, nested structures, uneven batches that leave a replica empty, rebatching of batch sizes
the replica count does not divide, repeat() with steps_per_epoch next() loops, InputOptions and
the errors TensorFlow raises for invalid combinations, auto-shard policies under MirroredStrategy,
element_spec, and experimental_distribute_values_from_function."""

from conformance_support import dtype_name, local, raises, two_cpus, val


def _sizes(s, dist):
    return [[len(v) for v in s.experimental_local_results(batch)] for batch in dist]


def _dist(tf, dataset, options=None):
    s = two_cpus(tf)
    return s, s.experimental_distribute_dataset(dataset, options)


def case_int64_labels_dtypes(tf):
    ds = tf.data.Dataset.from_tensor_slices((tf.constant([[1.0], [2.0], [3.0], [4.0]]),
                                             tf.constant([0, 1, 1, 0], tf.int64))).batch(4)
    s, dist = _dist(tf, ds)
    x, y = next(iter(dist))
    return [[dtype_name(v) for v in s.experimental_local_results(x)],
            [dtype_name(v) for v in s.experimental_local_results(y)], local(s, y)]


def case_nested_dict_of_tuples(tf):
    ds = tf.data.Dataset.from_tensor_slices({"f": ([1, 2, 3, 4], [5.0, 6.0, 7.0, 8.0]), "l": [0, 1, 0, 1]}).batch(4)
    s, dist = _dist(tf, ds)
    batch = next(iter(dist))
    return [sorted(batch), local(s, batch["f"][0]), local(s, batch["f"][1]), local(s, batch["l"])]


def case_empty_replica_at_end(tf):
    """A last global batch of one row: the second replica gets a batch of size 0."""
    s, dist = _dist(tf, tf.data.Dataset.range(9).batch(4))
    out = [local(s, batch) for batch in dist]
    return [out, _sizes(s, dist)]


def case_empty_replica_shape(tf):
    s, dist = _dist(tf, tf.data.Dataset.from_tensor_slices(tf.zeros([5, 3])).batch(4))
    return [[list(v.shape) for v in s.experimental_local_results(b)] for b in dist]


def case_global_batch_not_divisible(tf):
    s, dist = _dist(tf, tf.data.Dataset.range(12).batch(5))
    return [local(s, b) for b in dist]


def case_global_batch_not_divisible_drop_remainder(tf):
    s, dist = _dist(tf, tf.data.Dataset.range(12).batch(5, drop_remainder=True))
    return [local(s, b) for b in dist]


def case_batch_of_one(tf):
    s, dist = _dist(tf, tf.data.Dataset.range(3).batch(1))
    return [local(s, b) for b in dist]


def case_repeat_steps_per_epoch(tf):
    """``iterator = iter(dist_dataset)`` over ``repeat()``, then ``next()`` steps_per_epoch times per epoch."""
    s, dist = _dist(tf, tf.data.Dataset.range(6).batch(4).repeat())
    iterator = iter(dist)
    return [[local(s, next(iterator)) for _ in range(2)] for _epoch in range(3)]


def case_repeat_then_batch(tf):
    s, dist = _dist(tf, tf.data.Dataset.range(3).repeat(3).batch(4))
    return [local(s, b) for b in dist]


def case_shuffled_epochs_distributed(tf):
    s, dist = _dist(tf, tf.data.Dataset.range(8).shuffle(8, seed=5).batch(4))
    epochs = [sorted(sum((sum(local(s, b), []) for b in dist), [])) for _ in range(2)]
    return [e == list(range(8)) for e in epochs]


def case_next_on_dataset_directly(tf):
    s, dist = _dist(tf, tf.data.Dataset.range(4).batch(4))
    return raises(next, dist)


def case_iterator_element_spec(tf):
    s, dist = _dist(tf, tf.data.Dataset.from_tensor_slices(([1.0, 2.0], [1, 2])).batch(2))
    it = iter(dist)
    return [type(it.element_spec).__name__, type(it.element_spec[0]).__name__, it.element_spec == dist.element_spec,
            hasattr(it, "get_next_as_optional")]


def case_optional_get_value_at_end(tf):
    s, dist = _dist(tf, tf.data.Dataset.range(2).batch(2))
    it = iter(dist)
    it.get_next()
    optional = it.get_next_as_optional()
    return [bool(optional.has_value()), raises(optional.get_value)]


def case_fetch_to_device_false(tf):
    options = tf.distribute.InputOptions(experimental_fetch_to_device=False)
    s, dist = _dist(tf, tf.data.Dataset.range(6).batch(4), options)
    return [local(s, b) for b in dist]


def case_fetch_to_device_false_from_function(tf):
    s = two_cpus(tf)
    options = tf.distribute.InputOptions(experimental_fetch_to_device=False)
    dist = s.distribute_datasets_from_function(lambda ctx: tf.data.Dataset.range(4).batch(2), options)
    return [local(s, b) for b in dist]


def case_place_on_device_per_worker(tf):
    s = two_cpus(tf)
    options = tf.distribute.InputOptions(experimental_place_dataset_on_device=True, experimental_fetch_to_device=False)
    return raises(lambda: list(s.distribute_datasets_from_function(lambda ctx: tf.data.Dataset.range(2), options)))


def case_place_on_device_distribute_dataset(tf):
    s = two_cpus(tf)
    options = tf.distribute.InputOptions(experimental_place_dataset_on_device=True, experimental_fetch_to_device=False)
    return raises(s.experimental_distribute_dataset, tf.data.Dataset.range(4).batch(2), options)


def case_input_options_repr_fields(tf):
    o = tf.distribute.InputOptions(experimental_fetch_to_device=False, experimental_per_replica_buffer_size=3)
    return [o.experimental_fetch_to_device, o.experimental_per_replica_buffer_size,
            o.experimental_replication_mode == tf.distribute.InputReplicationMode.PER_WORKER,
            [m.name for m in tf.distribute.InputReplicationMode]]


def case_auto_shard_file_mirrored(tf):
    s = two_cpus(tf)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.FILE
    dist = s.experimental_distribute_dataset(tf.data.Dataset.range(10).batch(4).with_options(options))
    return [local(s, b) for b in dist]


def case_auto_shard_policy_default(tf):
    options = tf.data.Options()
    return [options.experimental_distribute.auto_shard_policy.name,
            tf.data.Dataset.range(3).options().experimental_distribute.auto_shard_policy.name]


def case_auto_shard_bad_value(tf):
    options = tf.data.Options()

    def set_it():
        options.experimental_distribute.auto_shard_policy = "DATA"
    return raises(set_it)


def case_from_function_shard_and_batch(tf):
    s = two_cpus(tf)

    def dataset_fn(ctx):
        batch = ctx.get_per_replica_batch_size(6)
        return tf.data.Dataset.range(12).shard(ctx.num_input_pipelines, ctx.input_pipeline_id).batch(batch)
    return [local(s, b) for b in s.distribute_datasets_from_function(dataset_fn)]


def case_from_function_uneven_end(tf):
    """Each replica's own dataset may end at a different step: TF gives the short one an empty batch."""
    s = two_cpus(tf)
    calls = []

    def dataset_fn(ctx):
        calls.append(ctx.input_pipeline_id)
        return tf.data.Dataset.range(5).batch(2)
    return [local(s, b) for b in s.distribute_datasets_from_function(dataset_fn)]


def case_from_function_element_spec(tf):
    s = two_cpus(tf)
    dist = s.distribute_datasets_from_function(lambda ctx: tf.data.Dataset.from_tensor_slices(
        ([1.0, 2.0], tf.constant([3, 4], tf.int64))).batch(1))
    spec = dist.element_spec
    return [type(spec).__name__, [type(leaf).__name__ for leaf in spec], spec == iter(dist).element_spec]


def case_values_from_function_context(tf):
    s = two_cpus(tf)
    values = s.experimental_distribute_values_from_function(
        lambda ctx: tf.constant([ctx.replica_id_in_sync_group, ctx.num_replicas_in_sync]))
    return [type(values).__name__, local(s, values)]


def case_values_from_function_dict(tf):
    s = two_cpus(tf)
    values = s.experimental_distribute_values_from_function(
        lambda ctx: {"a": tf.constant(float(ctx.replica_id_in_sync_group)), "b": tf.constant([1, 2])})
    return [sorted(values), type(values["a"]).__name__, local(s, values["a"]), type(values["b"]).__name__]


def case_values_from_function_python_value(tf):
    s = two_cpus(tf)
    values = s.experimental_distribute_values_from_function(lambda ctx: ctx.replica_id_in_sync_group)
    return [type(values).__name__, [int(val(v)) for v in s.experimental_local_results(values)]]


def case_run_on_dist_dataset_element(tf):
    s, dist = _dist(tf, tf.data.Dataset.from_tensor_slices(([1.0, 2.0, 3.0, 4.0, 5.0], [1, 0, 1, 0, 1])).batch(5))
    out = []
    for x, y in dist:
        per = s.run(lambda a, b: tf.reduce_sum(a * tf.cast(b, tf.float32)), args=(x, y))
        out.append([local(s, per), val(s.reduce("SUM", per, axis=None))])
    return out


def case_distributed_from_generator(tf):
    def gen():
        for i in range(5):
            yield [float(i)], i
    ds = tf.data.Dataset.from_generator(gen, output_signature=(tf.TensorSpec((1,), tf.float32),
                                                                tf.TensorSpec((), tf.int64))).batch(4)
    s, dist = _dist(tf, ds)
    return [[local(s, x), local(s, y)] for x, y in dist]


def case_cardinality_of_distributed(tf):
    s, dist = _dist(tf, tf.data.Dataset.range(10).batch(4))
    return [val(dist.cardinality), len(list(dist))]


def case_distributed_reduce(tf):
    """``dist_dataset.reduce(initial_state, reduce_fn)``: reduce_fn sees each distributed element."""
    s, dist = _dist(tf, tf.data.Dataset.range(10).batch(4))

    def reduce_fn(state, x):
        return state + s.reduce("SUM", s.run(tf.reduce_sum, args=(x,)), axis=None)
    return val(dist.reduce(tf.constant(0, tf.int64), reduce_fn))


def case_from_function_cardinality_and_reduce(tf):
    s = two_cpus(tf)
    dist = s.distribute_datasets_from_function(lambda ctx: tf.data.Dataset.range(6).batch(2))
    total = dist.reduce(tf.constant(0, tf.int64),
                        lambda state, x: state + s.reduce("SUM", s.run(tf.reduce_sum, args=(x,)), axis=None))
    return [val(dist.cardinality), val(total)]


def case_iterator_next_method(tf):
    s, dist = _dist(tf, tf.data.Dataset.range(4).batch(2))
    it = iter(dist)
    return [local(s, it.next()), local(s, it.next()), raises(it.next)]


def case_experimental_alias(tf):
    s = two_cpus(tf)
    dist = s.experimental_distribute_datasets_from_function(lambda ctx: tf.data.Dataset.range(4).batch(1))
    return [local(s, b) for b in dist]


def case_for_loop_in_function(tf):
    """The guide's ``for x in dist_dataset`` inside a ``tf.function``."""
    s, dist = _dist(tf, tf.data.Dataset.range(10).batch(4))

    @tf.function
    def total(dist_dataset):
        acc = tf.constant(0, tf.int64)
        for x in dist_dataset:
            acc += s.reduce("SUM", s.run(tf.reduce_sum, args=(x,)), axis=None)
        return acc
    return val(total(dist))


def case_generator_output_shapes(tf):
    """The guide's generator input: ``from_generator(output_types=..., output_shapes=tf.TensorShape([4]))``,
    each element a global batch of 4, ``next(iterator)`` in a Python loop."""
    def input_gen():
        for i in range(3):
            yield [float(i), i + 0.5, i + 0.25, i + 0.75]
    dataset = tf.data.Dataset.from_generator(input_gen, output_types=(tf.float32), output_shapes=tf.TensorShape([4]))
    s, dist = _dist(tf, dataset)
    iterator = iter(dist)
    return [local(s, s.run(lambda x: x * 2, args=(next(iterator),))) for _ in range(3)]


def case_range_loop_in_function(tf):
    """``for _ in tf.range(steps): strategy.run(step_fn, args=(next(iterator),))`` in a tf.function."""
    s, dist = _dist(tf, tf.data.Dataset.range(12).batch(4))
    total = tf.Variable(0, dtype=tf.int64)

    @tf.function
    def train_fn(iterator):
        for _ in tf.range(2):
            x = next(iterator)
            total.assign_add(s.reduce("SUM", s.run(tf.reduce_sum, args=(x,)), axis=None))
    iterator = iter(dist)
    train_fn(iterator)
    first = val(total)
    return [first, local(s, next(iterator))]


def case_optional_loop_in_function(tf):
    """The guide's ``get_next_as_optional`` with ``break`` inside a tf.function."""
    s, dist = _dist(tf, tf.data.Dataset.range(6).batch(4))
    seen = tf.Variable(0, dtype=tf.int64)

    @tf.function
    def train_fn(distributed_iterator):
        for _ in tf.range(5):
            optional_data = distributed_iterator.get_next_as_optional()
            if not optional_data.has_value():
                break
            x = optional_data.get_value()
            seen.assign_add(s.reduce("SUM", s.run(lambda v: tf.cast(tf.size(v), tf.int64), args=(x,)), axis=None))
    train_fn(iter(dist))
    return val(seen)


def case_print_per_replica_results(tf):
    """``tf.print(strategy.experimental_local_results(...))`` as the guide prints them."""
    import os
    import tempfile
    s, dist = _dist(tf, tf.data.Dataset.range(6).batch(4))
    path = os.path.join(tempfile.mkdtemp(), "printed.txt")
    for x in dist:
        tf.print(s.experimental_local_results(s.run(lambda v: v * 10, args=(x,))), output_stream="file://" + path)
    tf.print(tf.constant([[1.5, 2.0], [0.1, -3.0]]), "steps", 2, tf.constant(True), output_stream="file://" + path)
    tf.print(tf.range(10), {"a": tf.constant(1)}, sep="|", end="!\n", output_stream="file://" + path)
    tf.print(tf.range(10), summarize=-1, output_stream="file://" + path)
    with open(path) as f:
        return f.read()


def case_tensor_shape(tf):
    shape = tf.TensorShape([4, None])
    return [shape.as_list(), str(shape), repr(shape).replace("md.", "tf."), shape.rank, shape == [4, None],
            shape.is_fully_defined(), tf.TensorShape([2, 3]).num_elements(), str(tf.TensorShape(None)),
            raises(tf.TensorShape(None).as_list), spec_shape(tf.TensorSpec(tf.TensorShape([None, 3]), tf.float32))]


def spec_shape(spec):
    return [None if d is None else int(d) for d in spec.shape]


def case_file_policy_on_text_files(tf):
    """FILE (and AUTO) auto-sharding of a file dataset under MirroredStrategy: one worker reads every file."""
    import os
    import tempfile
    folder = tempfile.mkdtemp()
    paths = []
    for i in range(3):
        paths.append(os.path.join(folder, f"part{i}.txt"))
        with open(paths[-1], "w") as f:
            f.write("".join(f"{i}{j}\n" for j in range(3)))
    s = two_cpus(tf)
    out = []
    for policy in ("FILE", "AUTO", "DATA"):
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = getattr(tf.data.experimental.AutoShardPolicy, policy)
        dist = s.experimental_distribute_dataset(tf.data.TextLineDataset(paths).batch(4).with_options(options))
        out.append([[[_text(line) for line in val(v)] for v in s.experimental_local_results(b)] for b in dist])
    return out


def _text(line):
    return line.decode() if isinstance(line, bytes) else line


def case_dict_element_spec_and_optional(tf):
    s, dist = _dist(tf, tf.data.Dataset.from_tensor_slices({"x": [[1.0], [2.0]], "y": [1, 2]}).batch(2))
    spec = dist.element_spec
    it = iter(dist)
    optional = it.get_next_as_optional()
    value = optional.get_value()
    return [sorted(spec), type(spec["x"]).__name__, sorted(value), local(s, value["y"]),
            bool(it.get_next_as_optional().has_value()), raises(it.get_next)]


def _replica_shapes(spec):
    """Each replica's component shape in a PerReplicaSpec (TF keeps them in ``_value_specs``)."""
    return [spec_shape(v) for v in spec._value_specs]


def case_per_replica_spec_shapes(tf):
    s = two_cpus(tf)
    D = tf.data.Dataset
    x = tf.zeros([8, 3])
    out = []
    for ds in (D.from_tensor_slices(x).batch(4, drop_remainder=True), D.from_tensor_slices(x).batch(4),
               D.from_tensor_slices(x).batch(5, drop_remainder=True),
               D.from_tensor_slices((x, tf.range(8))).batch(4, drop_remainder=True)):
        spec = s.experimental_distribute_dataset(ds).element_spec
        out.append([_replica_shapes(leaf) for leaf in (spec if isinstance(spec, tuple) else (spec,))])
    fn = s.distribute_datasets_from_function(lambda ctx: D.from_tensor_slices(x).batch(2, drop_remainder=True))
    out.append(_replica_shapes(fn.element_spec))
    return out


def case_padded_and_bucketed_global_batches(tf):
    """Variable-length sequences padded per global batch, then split: each replica's slice keeps the
    global batch's padded length."""
    s = two_cpus(tf)
    seqs = tf.data.Dataset.from_generator(lambda: ([n] * n for n in (1, 3, 2, 5, 4, 1, 2)),
                                          output_signature=tf.TensorSpec((None,), tf.int32))
    padded = s.experimental_distribute_dataset(seqs.padded_batch(4))
    bucketed = s.experimental_distribute_dataset(seqs.bucket_by_sequence_length(
        lambda x: tf.shape(x)[0], bucket_boundaries=[3], bucket_batch_sizes=[2, 2]))
    return [[local(s, b) for b in padded], [local(s, b) for b in bucketed]]


def case_shuffled_distributed_epochs_differ(tf):
    s, dist = _dist(tf, tf.data.Dataset.range(16).shuffle(16, seed=9).batch(8))
    epochs = [[local(s, b) for b in dist] for _ in range(3)]
    flat = [sorted(sum((sum(step, []) for step in e), [])) for e in epochs]
    return [all(f == list(range(16)) for f in flat), epochs[0] != epochs[1] or epochs[1] != epochs[2]]


def case_guide_first_example(tf):
    """The guide's opening program: ``from_tensors(([1.], [1.])).repeat(100).batch(16)``, a
    ``tf.function`` train_step over the distributed dataset."""
    s = two_cpus(tf)
    dataset = tf.data.Dataset.from_tensors(([1.], [1.])).repeat(100).batch(16)
    dist_dataset = s.experimental_distribute_dataset(dataset)

    @tf.function
    def train_step(inputs):
        features, labels = inputs
        return labels - 0.3 * features
    losses = [s.run(train_step, args=(x,)) for x in dist_dataset]
    return [len(losses), [[list(v.shape) for v in s.experimental_local_results(loss)] for loss in losses[-2:]],
            local(s, losses[-1])]


def case_guide_dataset_fn_nested_batches(tf):
    """The guide's dataset_fn: batch(16), shard, batch(per-replica size), prefetch (nested batches)."""
    s = two_cpus(tf)
    global_batch_size = 16

    def dataset_fn(input_context):
        batch_size = input_context.get_per_replica_batch_size(global_batch_size)
        dataset = tf.data.Dataset.from_tensors(([1.], [1.])).repeat(64).batch(16)
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        dataset = dataset.batch(batch_size)
        return dataset.prefetch(2)
    dist = s.distribute_datasets_from_function(dataset_fn)
    return [[[list(v.shape) for v in s.experimental_local_results(x)] for x, _ in dist]]


def case_guide_values_from_function_loop(tf):
    s = two_cpus(tf)
    distributed_values = s.experimental_distribute_values_from_function(lambda ctx: tf.constant(1.0))
    results = [local(s, s.run(lambda x: x, args=(distributed_values,))) for _ in range(4)]
    return [list(s.extended.worker_devices), results]


# PER_REPLICA cases last: TF 2.21's MirroredStrategy keeps the PER_REPLICA input workers for the
# datasets distributed after them (record_tf.py starts each case file in a fresh interpreter).


def case_place_on_device_with_fetch(tf):
    """place_dataset_on_device with fetch_to_device (its default True): TF refuses the pair."""
    s = two_cpus(tf)
    options = tf.distribute.InputOptions(experimental_place_dataset_on_device=True,
                                         experimental_replication_mode=tf.distribute.InputReplicationMode.PER_REPLICA)
    return raises(lambda: list(s.distribute_datasets_from_function(lambda ctx: tf.data.Dataset.range(2), options)))


def case_place_on_device_per_replica(tf):
    s = two_cpus(tf)
    options = tf.distribute.InputOptions(experimental_place_dataset_on_device=True, experimental_fetch_to_device=False,
                                         experimental_replication_mode=tf.distribute.InputReplicationMode.PER_REPLICA)

    def dataset_fn(ctx):
        return tf.data.Dataset.range(4).shard(ctx.num_input_pipelines, ctx.input_pipeline_id).batch(1)
    return [local(s, b) for b in s.distribute_datasets_from_function(dataset_fn, options)]


def case_per_replica_mode_context(tf):
    s = two_cpus(tf)
    options = tf.distribute.InputOptions(experimental_replication_mode=tf.distribute.InputReplicationMode.PER_REPLICA,
                                         experimental_fetch_to_device=False)
    seen = []

    def dataset_fn(ctx):
        seen.append([ctx.num_input_pipelines, ctx.input_pipeline_id, ctx.num_replicas_in_sync])
        return tf.data.Dataset.range(2).batch(1)
    list(s.distribute_datasets_from_function(dataset_fn, options))
    return seen
