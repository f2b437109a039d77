"""Pipelines users chain before ``strategy.experimental_distribute_dataset`` (the tf.data guide's
transformations, then the "Distributed input" guide's distribution), typed with ``md.``: each case
records every step's per-replica slices, so a different split, order or partial batch shows."""

from conformance_support import local, one_cpu, raises, two_cpus, val


def _steps(tf, dataset, options=None):
    s = two_cpus(tf)
    return [local(s, b) for b in s.experimental_distribute_dataset(dataset, options)]


def _with_policy(tf, dataset, policy):
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = getattr(tf.data.experimental.AutoShardPolicy, policy)
    return dataset.with_options(options)


def case_batch_then_repeat(tf):
    """A partial batch in the middle of the stream (every epoch ends with one)."""
    return _steps(tf, tf.data.Dataset.range(5).batch(4).repeat(2))


def case_repeat_then_batch_partial(tf):
    return _steps(tf, tf.data.Dataset.range(5).repeat(2).batch(4))


def case_partial_three_of_four(tf):
    return _steps(tf, tf.data.Dataset.range(7).batch(4))


def case_unbatch_then_batch(tf):
    return _steps(tf, tf.data.Dataset.range(10).batch(3).unbatch().batch(4))


def case_filter_before_batch(tf):
    return _steps(tf, tf.data.Dataset.range(12).filter(lambda x: x % 3 != 0).batch(4))


def case_filter_after_batch(tf):
    return _steps(tf, tf.data.Dataset.range(12).batch(4).filter(lambda b: tf.reduce_sum(b) > 10))


def case_take_after_batch(tf):
    return _steps(tf, tf.data.Dataset.range(10).batch(4).take(2))


def case_skip_after_batch(tf):
    return _steps(tf, tf.data.Dataset.range(10).batch(4).skip(1))


def case_take_skip_before_batch(tf):
    return _steps(tf, tf.data.Dataset.range(10).skip(3).take(5).batch(4))


def case_enumerate_before_batch(tf):
    s = two_cpus(tf)
    dist = s.experimental_distribute_dataset(tf.data.Dataset.range(10, 16).enumerate().batch(4))
    return [[local(s, i), local(s, x)] for i, x in dist]


def case_enumerate_after_batch(tf):
    """``enumerate()`` of a batched dataset: the index is a scalar per global batch."""
    s = two_cpus(tf)
    dist = s.experimental_distribute_dataset(tf.data.Dataset.range(6).batch(4).enumerate())
    return [[local(s, i), local(s, x)] for i, x in dist]


def case_zip_of_batched(tf):
    s = two_cpus(tf)
    ds = tf.data.Dataset.zip((tf.data.Dataset.range(6).batch(4), tf.data.Dataset.range(10, 16).batch(4)))
    return [[local(s, a), local(s, b)] for a, b in s.experimental_distribute_dataset(ds)]


def case_zip_then_batch(tf):
    s = two_cpus(tf)
    ds = tf.data.Dataset.zip((tf.data.Dataset.range(5), tf.data.Dataset.range(10, 15))).batch(4)
    return [[local(s, a), local(s, b)] for a, b in s.experimental_distribute_dataset(ds)]


def case_concatenate_batched(tf):
    """Two batched datasets one after the other: a partial batch, then full ones again."""
    ds = tf.data.Dataset.range(5).batch(4).concatenate(tf.data.Dataset.range(10, 17).batch(4))
    return _steps(tf, ds)


def case_concatenate_then_batch(tf):
    return _steps(tf, tf.data.Dataset.range(3).concatenate(tf.data.Dataset.range(10, 14)).batch(4))


def case_interleave_then_batch(tf):
    ds = tf.data.Dataset.range(1, 4).interleave(lambda x: tf.data.Dataset.from_tensors(x).repeat(x), cycle_length=2)
    return _steps(tf, ds.batch(4))


def case_interleave_of_batched(tf):
    ds = tf.data.Dataset.range(2).interleave(lambda x: tf.data.Dataset.range(x * 10, x * 10 + 5).batch(4),
                                             cycle_length=2)
    return _steps(tf, ds)


def case_padded_batch_padding_values(tf):
    ds = tf.data.Dataset.range(1, 6).map(lambda n: tf.fill([n], n))
    return _steps(tf, ds.padded_batch(4, padded_shapes=[6], padding_values=tf.constant(-1, tf.int64)))


def case_padded_batch_tuple_padding(tf):
    s = two_cpus(tf)
    ds = tf.data.Dataset.range(1, 6).map(lambda n: (tf.fill([n], n), tf.cast(n, tf.float32)))
    dist = s.experimental_distribute_dataset(ds.padded_batch(
        3, padded_shapes=([None], []), padding_values=(tf.constant(9, tf.int64), 0.0), drop_remainder=False))
    return [[local(s, x), local(s, y)] for x, y in dist]


def case_bucket_by_sequence_length_padding(tf):
    ds = tf.data.Dataset.from_generator(lambda: ([n] * n for n in (1, 4, 2, 5, 3, 1, 2, 6)),
                                        output_signature=tf.TensorSpec((None,), tf.int32))
    ds = ds.bucket_by_sequence_length(lambda x: tf.shape(x)[0], bucket_boundaries=[3, 5],
                                      bucket_batch_sizes=[2, 2, 2], padding_values=-1)
    return _steps(tf, ds)


def case_group_by_window(tf):
    ds = tf.data.Dataset.range(10).group_by_window(key_func=lambda x: x % 2,
                                                   reduce_func=lambda key, w: w.batch(3), window_size=3)
    return _steps(tf, ds)


def case_scan_then_batch(tf):
    ds = tf.data.Dataset.range(6).scan(tf.constant(0, tf.int64), lambda state, x: (state + x, state * 10 + x))
    return _steps(tf, ds.batch(4))


def case_rebatch_then_distribute(tf):
    return _steps(tf, tf.data.Dataset.range(12).batch(6).rebatch(4))


def case_rebatch_list_then_distribute(tf):
    return _steps(tf, tf.data.Dataset.range(12).batch(6).rebatch([4, 2]))


def case_map_after_batch_prefetch(tf):
    return _steps(tf, tf.data.Dataset.range(6).batch(4).map(lambda b: b * 2).prefetch(tf.data.AUTOTUNE))


def case_cache_second_epoch(tf):
    s = two_cpus(tf)
    counter = tf.Variable(0, dtype=tf.int64)

    def count(x):
        counter.assign_add(1)
        return x + counter * 0
    dist = s.experimental_distribute_dataset(tf.data.Dataset.range(6).map(count).cache().batch(4))
    epochs = [[local(s, b) for b in dist] for _ in range(2)]
    return [epochs, val(counter)]


def case_shuffle_fixed_order_two_epochs(tf):
    """``reshuffle_each_iteration=False``: each ``for`` over the distributed dataset sees one order."""
    s = two_cpus(tf)
    dist = s.experimental_distribute_dataset(
        tf.data.Dataset.range(10).shuffle(10, seed=3, reshuffle_each_iteration=False).batch(4))
    epochs = [[local(s, b) for b in dist] for _ in range(2)]
    flat = sorted(sum((sum(step, []) for step in epochs[0]), []))
    return [epochs[0] == epochs[1], flat, [[len(r) for r in step] for step in epochs[0]]]


def case_shuffle_repeat_batch_sizes(tf):
    s = two_cpus(tf)
    dist = s.experimental_distribute_dataset(tf.data.Dataset.range(5).shuffle(5, seed=1).repeat(2).batch(4))
    steps = [local(s, b) for b in dist]
    return [[[len(r) for r in step] for step in steps], sorted(sum((sum(st, []) for st in steps), []))]


def case_auto_shard_data_partial(tf):
    return _steps(tf, _with_policy(tf, tf.data.Dataset.range(7).batch(4), "DATA"))


def case_auto_shard_off_middle_partial(tf):
    """OFF fills a partial batch's replicas in order, also one in the middle of the stream."""
    return _steps(tf, _with_policy(tf, tf.data.Dataset.range(5).batch(4).repeat(2), "OFF"))


def case_auto_shard_off_filter_after_batch(tf):
    return _steps(tf, _with_policy(tf, tf.data.Dataset.range(11).batch(4).filter(lambda b: b[0] != 4), "OFF"))


def case_not_deterministic_parallel_map(tf):
    options = tf.data.Options()
    options.experimental_deterministic = False
    ds = tf.data.Dataset.range(8).map(lambda x: x * x, num_parallel_calls=2).batch(4).with_options(options)
    steps = _steps(tf, ds)
    return [[len(r) for r in step] for step in steps] + [sorted(sum((sum(st, []) for st in steps), []))]


def case_for_twice_and_mixed_next(tf):
    s = two_cpus(tf)
    dist = s.experimental_distribute_dataset(tf.data.Dataset.range(7).batch(4))
    first = [local(s, b) for b in dist]
    it = iter(dist)
    head = local(s, next(it))
    rest = [local(s, b) for b in it]
    return [first, head, rest, [local(s, b) for b in dist]]


def case_optional_past_partial(tf):
    s = two_cpus(tf)
    it = iter(s.experimental_distribute_dataset(tf.data.Dataset.range(5).batch(4)))
    out = []
    for _ in range(3):
        optional = it.get_next_as_optional()
        out.append([bool(optional.has_value()), local(s, optional.get_value()) if optional.has_value() else None])
    return out


def case_element_spec_after_transforms(tf):
    s = two_cpus(tf)
    ds = tf.data.Dataset.range(1, 6).map(lambda n: {"x": tf.fill([n], tf.cast(n, tf.float32)), "n": n})
    dist = s.experimental_distribute_dataset(ds.padded_batch(4))
    es = dist.element_spec
    return [sorted(es), type(es["x"]).__name__, type(es["n"]).__name__]


def case_cardinality_after_transforms(tf):
    s = two_cpus(tf)
    out = []
    for ds in (tf.data.Dataset.range(10).batch(4).filter(lambda b: True), tf.data.Dataset.range(10).batch(4).repeat(),
               tf.data.Dataset.range(10).batch(4).take(2), tf.data.Dataset.range(10).batch(3).unbatch().batch(4)):
        out.append([val(ds.cardinality()), val(s.experimental_distribute_dataset(ds).cardinality)])
    return out


def case_gather_rebuilds_global_batch(tf):
    s = two_cpus(tf)
    dist = s.experimental_distribute_dataset(tf.data.Dataset.range(7).batch(4))
    return [val(s.gather(b, axis=0)) for b in dist]


def case_gather_after_run_partial(tf):
    s = two_cpus(tf)
    dist = s.experimental_distribute_dataset(tf.data.Dataset.range(9).map(lambda x: tf.cast(x, tf.float32)).batch(4))
    return [val(s.gather(s.run(lambda x: x * 2.0, args=(b,)), axis=0)) for b in dist]


def case_reduce_sums_of_partial_batches(tf):
    s = two_cpus(tf)
    dist = s.experimental_distribute_dataset(tf.data.Dataset.range(9).map(lambda x: tf.cast(x, tf.float32)).batch(4))
    out = []
    for b in dist:
        sums = s.run(tf.reduce_sum, args=(b,))
        out.append([val(s.reduce("SUM", sums, axis=None)), val(s.reduce("MEAN", b, axis=0)),
                    val(s.reduce("SUM", b, axis=0))])
    return out


def case_from_function_shard_per_replica_batch(tf):
    s = two_cpus(tf)

    def dataset_fn(ctx):
        batch = ctx.get_per_replica_batch_size(6)
        ds = tf.data.Dataset.range(14).shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
        return ds.batch(batch)
    return [local(s, b) for b in s.distribute_datasets_from_function(dataset_fn)]


def case_values_from_function_batches(tf):
    s = two_cpus(tf)
    values = s.experimental_distribute_values_from_function(
        lambda ctx: {"x": tf.range(ctx.replica_id_in_sync_group + 1), "id": ctx.replica_id_in_sync_group})
    return [local(s, values["x"]), local(s, values["id"])]


def case_generator_signature_dict(tf):
    s = two_cpus(tf)

    def gen():
        for i in range(5):
            yield {"ids": [i, i + 1], "label": float(i)}
    ds = tf.data.Dataset.from_generator(gen, output_signature={"ids": tf.TensorSpec((2,), tf.int32),
                                                               "label": tf.TensorSpec((), tf.float32)})
    return [[local(s, b["ids"]), local(s, b["label"])] for b in s.experimental_distribute_dataset(ds.batch(4))]


def case_slices_of_dict_map_to_tuple(tf):
    s = two_cpus(tf)
    ds = tf.data.Dataset.from_tensor_slices({"a": [1.0, 2.0, 3.0, 4.0, 5.0], "b": [[1, 0], [0, 1], [1, 1], [0, 0],
                                                                                  [2, 2]]})
    ds = ds.map(lambda d: ({"sum": d["a"] + tf.cast(tf.reduce_sum(d["b"]), tf.float32)}, d["b"])).batch(3)
    return [[local(s, x["sum"]), local(s, y)] for x, y in s.experimental_distribute_dataset(ds)]


def case_numpy_function_distributed(tf):
    s = two_cpus(tf)

    def double(x):
        return x * 2
    ds = tf.data.Dataset.range(5).map(lambda x: tf.numpy_function(double, [x], tf.int64)).batch(4)
    return _steps(tf, ds)


def case_train_on_batch_repeat(tf):
    """A custom loop over ``batch(4).repeat(2)`` of 5 examples (a partial batch mid-stream):
    compute_average_loss divides by the global batch size (4); the partial batch's replicas
    contribute their rows."""
    s = two_cpus(tf)
    with s.scope():
        w = tf.Variable([[0.5], [-0.25]])
        opt = tf.keras.optimizers.SGD(0.1)
    xs = tf.constant([[1.0, 2.0], [0.5, -1.0], [2.0, 0.0], [-1.0, 1.0], [0.0, 3.0]])
    ys = tf.constant([[1.0], [0.0], [2.0], [-1.0], [1.5]])
    ds = tf.data.Dataset.from_tensor_slices((xs, ys)).batch(4).repeat(2)

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(tf.reduce_sum((tf.matmul(x, w) - y) ** 2, axis=1), global_batch_size=4)
        opt.apply_gradients([(tape.gradient(loss, w), w)])
        return loss
    losses = [val(s.reduce("SUM", s.run(step, args=(x, y)), axis=None)) for x, y in s.experimental_distribute_dataset(ds)]
    return [losses, val(w.numpy())]



def _off_pipelines(tf):
    D = tf.data.Dataset
    return [D.range(7).batch(5).repeat(2), D.range(14).batch(5).filter(lambda b: b[0] != 5),
            D.range(5).batch(4).concatenate(D.range(10, 17).batch(4)),
            D.zip((D.range(5).batch(4), D.range(10, 15).batch(4))),
            D.range(2).interleave(lambda x: D.range(x * 10, x * 10 + 5).batch(4), cycle_length=2),
            D.range(6).batch(4).map(lambda b: (b, b * 2)), D.range(10).batch(6).rebatch(4),
            D.range(5).batch(4).repeat(3).take(3), D.range(5).batch(4).repeat(2).unbatch().batch(3),
            D.range(7).batch(3), D.range(5).batch(4).repeat(2).shuffle(1).prefetch(1)]


def case_auto_shard_off_pipelines(tf):
    """OFF re-cuts the rows in order where TF knows the batch size (batch under filter/repeat/take,
    a zip or concatenation of one batch size); a map, rebatch or interleave leaves it unknown."""
    return [_steps(tf, _with_policy(tf, ds, "OFF")) for ds in _off_pipelines(tf)]


def case_auto_shard_hint_pipelines(tf):
    return [_steps(tf, _with_policy(tf, ds, "HINT")) for ds in _off_pipelines(tf)[:3]]


def case_auto_shard_data_pipelines(tf):
    return [_steps(tf, _with_policy(tf, ds, "DATA")) for ds in _off_pipelines(tf)]


def case_auto_shard_off_past_end_shapes(tf):
    """The replica past the end of an OFF stream gets an empty batch of the element spec's shape."""
    s = two_cpus(tf)
    ds = tf.data.Dataset.range(1, 6).map(lambda n: (tf.fill([n], n), tf.zeros([2, 3]))).padded_batch(4)
    dist = s.experimental_distribute_dataset(_with_policy(tf, ds, "OFF"))
    return [[[list(x.shape), list(y.shape)] for x, y in s.experimental_local_results(b)] for b in dist]


def case_auto_shard_off_padded_widths_differ(tf):
    """OFF joins a partial batch's rows with the next batch's: padded batches of other widths cannot join
    (TF: FailedPreconditionError naming no cause; md's says why)."""
    s = two_cpus(tf)
    ds = tf.data.Dataset.range(1, 8).map(lambda n: tf.fill([n], n)).padded_batch(4).repeat(2)
    dist = s.experimental_distribute_dataset(_with_policy(tf, ds, "OFF"))
    return raises(lambda: [local(s, b) for b in dist])


def case_train_on_batch_repeat_auto_shard_off(tf):
    """The training loop of ``train_on_batch_repeat`` with auto-sharding OFF: steps mix the epochs' rows."""
    s = two_cpus(tf)
    with s.scope():
        w = tf.Variable([[0.5], [-0.25]])
        opt = tf.keras.optimizers.SGD(0.1)
    xs = tf.constant([[1.0, 2.0], [0.5, -1.0], [2.0, 0.0], [-1.0, 1.0], [0.0, 3.0]])
    ys = tf.constant([[1.0], [0.0], [2.0], [-1.0], [1.5]])
    ds = _with_policy(tf, tf.data.Dataset.from_tensor_slices((xs, ys)).batch(4).repeat(2), "OFF")

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(tf.reduce_sum((tf.matmul(x, w) - y) ** 2, axis=1), global_batch_size=4)
        opt.apply_gradients([(tape.gradient(loss, w), w)])
        return loss
    losses = [val(s.reduce("SUM", s.run(step, args=(x, y)), axis=None)) for x, y in s.experimental_distribute_dataset(ds)]
    return [losses, val(w.numpy())]


def case_two_iterators_interleaved(tf):
    s = two_cpus(tf)
    dist = s.experimental_distribute_dataset(tf.data.Dataset.range(6).batch(2))
    a, b = iter(dist), iter(dist)
    return [local(s, next(a)), local(s, next(b)), local(s, next(a)), local(s, next(a)), local(s, next(b))]


def case_dataset_fn_calls_over_epochs(tf):
    """``distribute_datasets_from_function`` calls the function once per input pipeline, not per epoch."""
    s = two_cpus(tf)
    calls = []

    def dataset_fn(ctx):
        calls.append(ctx.input_pipeline_id)
        return tf.data.Dataset.range(4).batch(ctx.get_per_replica_batch_size(4))
    dist = s.distribute_datasets_from_function(dataset_fn)
    epochs = [[local(s, b) for b in dist] for _ in range(2)]
    return [len(calls), epochs]


def case_unbatched_rows_of_matrix(tf):
    """Elements that are vectors (no batch()): each is cut along its dimension 0."""
    s = two_cpus(tf)
    ds = tf.data.Dataset.from_tensor_slices(tf.reshape(tf.range(12), [4, 3]))
    return [local(s, b) for b in s.experimental_distribute_dataset(ds)]


def case_generator_fixed_shape_unbatched(tf):
    def gen():
        for i in range(3):
            yield [i, i + 10, i + 20, i + 30]
    ds = tf.data.Dataset.from_generator(gen, output_signature=tf.TensorSpec((4,), tf.int64))
    return _steps(tf, ds)


def case_padded_batch_drop_remainder_spec(tf):
    s = two_cpus(tf)
    ds = tf.data.Dataset.range(1, 8).map(lambda n: tf.fill([n], n)).padded_batch(3, padded_shapes=[7],
                                                                                   drop_remainder=True)
    dist = s.experimental_distribute_dataset(ds)
    even = s.experimental_distribute_dataset(tf.data.Dataset.range(9).batch(4, drop_remainder=True))
    return [[local(s, b) for b in dist], _replica_shapes(dist.element_spec), _replica_shapes(even.element_spec)]


def _replica_shapes(spec):
    """The replicas' shapes in a PerReplicaSpec (TF keeps them in ``_component_specs``, md in ``value_specs``)."""
    specs = spec._component_specs if hasattr(spec, "_component_specs") else spec.value_specs
    return [[None if d is None else int(d) for d in v.shape] for v in specs]


def case_window_flat_map_batches(tf):
    ds = tf.data.Dataset.range(9).window(4, shift=3).flat_map(lambda w: w.batch(4))
    return _steps(tf, ds)


def case_sample_from_datasets_batched(tf):
    s = two_cpus(tf)
    ds = tf.data.Dataset.sample_from_datasets([tf.data.Dataset.range(5), tf.data.Dataset.range(100, 105)],
                                              seed=3).batch(4)
    steps = [local(s, b) for b in s.experimental_distribute_dataset(ds)]
    return [[[len(r) for r in st] for st in steps], sorted(sum((sum(st, []) for st in steps), []))]


def case_batch_parallel_deterministic(tf):
    ds = tf.data.Dataset.range(10).map(lambda x: x * 3).batch(4, num_parallel_calls=2, deterministic=True)
    return _steps(tf, ds)


def case_distributed_string_tensors(tf):
    s = two_cpus(tf)
    ds = tf.data.Dataset.from_tensor_slices((["a", "bb", "ccc", "dd", "e"], [1, 2, 3, 4, 5])).batch(4)
    out = []
    for words, n in s.experimental_distribute_dataset(ds):
        out.append([[[w.decode() if isinstance(w, bytes) else str(w) for w in val(v)]
                     for v in s.experimental_local_results(words)], local(s, n)])
    return out


_FIT_X = [[float(i % 5) - 2.0, float((i * 3) % 7) / 7.0] for i in range(13)]
_FIT_Y = [[float(i % 3)] for i in range(13)]


def _fit(tf, dataset, strategy=two_cpus, **kwargs):
    """Keras ``fit`` of a Dense(1) on a two-replica strategy: loss history, mae and the weights."""
    s = strategy(tf)
    with s.scope():
        model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(
            1, kernel_initializer=tf.keras.initializers.Constant(0.5), bias_initializer="zeros")])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse", metrics=["mae"])
    history = model.fit(dataset, verbose=0, **kwargs)
    return [history.history["loss"], history.history["mae"], [val(w.numpy()) for w in model.trainable_variables],
            val(model.evaluate(dataset, verbose=0, steps=kwargs.get("steps_per_epoch")))]


def case_fit_partial_batch(tf):
    return _fit(tf, tf.data.Dataset.from_tensor_slices((_FIT_X, _FIT_Y)).batch(8), epochs=2)


def case_fit_finite_batch_repeat_auto_shard_off(tf):
    """6 examples in batches of 4, repeated twice, OFF: three steps of 4 rows (TF's cardinality says 4)."""
    ds = tf.data.Dataset.from_tensor_slices((_FIT_X[:6], _FIT_Y[:6])).batch(4).repeat(2)
    return _fit(tf, _with_policy(tf, ds, "OFF"), epochs=2)


def case_validation_and_predict_steps_auto_shard_off(tf):
    """``validation_steps`` and ``predict(steps=)`` on an endless OFF dataset of 5 examples in batches of 4:
    steps of 4 rows across the batches (rows 0-3, then 4 0 1 2)."""
    s = two_cpus(tf)
    with s.scope():
        model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(
            1, kernel_initializer=tf.keras.initializers.Constant(0.5), bias_initializer="zeros")])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse", metrics=["mae"])
    ds = _with_policy(tf, tf.data.Dataset.from_tensor_slices((_FIT_X[:5], _FIT_Y[:5])).batch(4).repeat(), "OFF")
    history = model.fit(ds, epochs=1, steps_per_epoch=2, validation_data=ds, validation_steps=2, verbose=0)
    x_only = _with_policy(tf, tf.data.Dataset.from_tensor_slices(_FIT_X[:5]).batch(4).repeat(), "OFF")
    return [history.history["val_loss"], history.history["val_mae"], val(model.predict(x_only, steps=2, verbose=0))]


def case_fit_class_weight_auto_shard_off(tf):
    """``class_weight`` on an OFF dataset whose steps join two batches' rows."""
    s = two_cpus(tf)
    with s.scope():
        model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(
            2, kernel_initializer=tf.keras.initializers.Constant(0.5), bias_initializer="zeros")])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.1),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    labels = [i % 2 for i in range(6)]
    ds = _with_policy(tf, tf.data.Dataset.from_tensor_slices((_FIT_X[:6], labels)).batch(4).repeat(2), "OFF")
    history = model.fit(ds, epochs=2, class_weight={0: 1.0, 1: 3.0}, verbose=0)
    return [history.history["loss"], [val(w.numpy()) for w in model.trainable_variables]]


def case_fit_partial_batch_one_device(tf):
    """The reference md's two-replica fit gives on an uneven last batch (one device's weights)."""
    return _fit(tf, tf.data.Dataset.from_tensor_slices((_FIT_X, _FIT_Y)).batch(8), strategy=one_cpu, epochs=2)


def case_fit_partial_batch_auto_shard_off(tf):
    """With auto-sharding OFF TF 2.21 fills the last batch's replicas in order ([4, 1] of 5 rows)."""
    ds = tf.data.Dataset.from_tensor_slices((_FIT_X, _FIT_Y)).batch(8)
    return _fit(tf, _with_policy(tf, ds, "OFF"), epochs=2)


def case_fit_repeat_steps_auto_shard_off(tf):
    ds = tf.data.Dataset.from_tensor_slices((_FIT_X[:5], _FIT_Y[:5])).batch(4).repeat()
    return _fit(tf, _with_policy(tf, ds, "OFF"), epochs=1, steps_per_epoch=3)


def case_from_function_per_replica_shard(tf):
    """Last in the file: TF 2.21's MirroredStrategy keeps the PER_REPLICA mode for later datasets (with
    auto-sharding OFF each replica then reads the whole dataset)."""
    s = two_cpus(tf)
    seen = []

    def dataset_fn(ctx):
        seen.append([ctx.num_input_pipelines, ctx.input_pipeline_id, ctx.num_replicas_in_sync])
        return tf.data.Dataset.range(9).shard(ctx.num_input_pipelines, ctx.input_pipeline_id).batch(2)
    options = tf.distribute.InputOptions(experimental_replication_mode=tf.distribute.InputReplicationMode.PER_REPLICA)
    steps = [local(s, b) for b in s.distribute_datasets_from_function(dataset_fn, options)]
    return [sorted(seen), steps]
