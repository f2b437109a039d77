"""tf.data's common pipeline ops as the tf.data guide writes them (range, take/skip, map, filter,
batch/unbatch/padded_batch/rebatch, window/flat_map, interleave, zip/concatenate, enumerate, cache,
prefetch, from_generator, reduce, cardinality, bucket_by_sequence_length, ...). Every case is
deterministic; shuffle's random orders are checked by their properties only."""

from conformance_support import dtype_name, raises, spec, val


def _list(dataset):
    return [val(x) for x in dataset]


def case_range_forms(tf):
    D = tf.data.Dataset
    return [_list(D.range(5)), _list(D.range(2, 5)), _list(D.range(1, 10, 3)), _list(D.range(5, 0, -2)),
            dtype_name(D.range(3, output_type=tf.int32).element_spec)]


def case_take_skip(tf):
    ds = tf.data.Dataset.range(10)
    return [_list(ds.skip(3).take(4)), _list(ds.take(-1)), _list(ds.skip(-1)), _list(ds.take(20).skip(8)),
            _list(ds.take(0))]


def case_cardinality_values(tf):
    ds = tf.data.Dataset.range(10)
    return [val(c) for c in (ds.cardinality(), ds.batch(3).cardinality(),
                             ds.batch(3, drop_remainder=True).cardinality(),
                             ds.repeat().cardinality(), ds.filter(lambda x: x > 2).cardinality(),
                             ds.repeat().take(7).cardinality(), ds.repeat(3).cardinality(), ds.skip(4).cardinality(),
                             ds.shard(3, 1).cardinality(), tf.data.experimental.cardinality(ds.take(2)))]


def case_cardinality_constants(tf):
    return [int(tf.data.INFINITE_CARDINALITY), int(tf.data.UNKNOWN_CARDINALITY),
            int(tf.data.experimental.INFINITE_CARDINALITY), int(tf.data.experimental.UNKNOWN_CARDINALITY)]


def case_assert_cardinality(tf):
    ds = tf.data.Dataset.range(10).filter(lambda x: x % 2 == 0)
    asserted = ds.apply(tf.data.experimental.assert_cardinality(5))
    return [val(ds.cardinality()), val(asserted.cardinality()), _list(asserted)]


def case_assert_cardinality_too_few(tf):
    ds = tf.data.Dataset.range(4).filter(lambda x: x < 2).apply(tf.data.experimental.assert_cardinality(3))
    return raises(lambda: list(ds))


def case_assert_cardinality_too_many(tf):
    ds = tf.data.Dataset.range(4).filter(lambda x: x < 3).apply(tf.data.experimental.assert_cardinality(2))
    return raises(lambda: list(ds))


def case_map_forms(tf):
    D = tf.data.Dataset
    pairs = D.from_tensor_slices(([1, 2, 3], [10, 20, 30]))
    return [_list(D.range(5).map(lambda x: x * x, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)),
            _list(pairs.map(lambda a, b: a + b)),
            _list(pairs.map(lambda a, b: (b, a))),
            _list(D.from_tensor_slices({"a": [1, 2], "b": [3, 4]}).map(lambda d: d["a"] * d["b"])),
            _list(D.range(4).map(lambda x: {"x": x, "double": x * 2}, num_parallel_calls=2))]


def case_filter_enumerate(tf):
    D = tf.data.Dataset
    return [_list(D.range(10).filter(lambda x: x % 3 == 0)),
            _list(D.from_tensor_slices([7, 8, 9]).enumerate()),
            _list(D.from_tensor_slices([7, 8, 9]).enumerate(start=5)),
            spec(D.from_tensor_slices([7, 8, 9]).enumerate().element_spec)]


def case_batch_forms(tf):
    ds = tf.data.Dataset.range(10)
    return [_list(ds.batch(3)), _list(ds.batch(3, drop_remainder=True)), _list(ds.batch(4).unbatch()),
            spec(ds.batch(3).element_spec), spec(ds.batch(3, drop_remainder=True).element_spec),
            _list(ds.batch(3, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True))]


def case_batch_of_pairs_and_dicts(tf):
    D = tf.data.Dataset
    pairs = D.from_tensor_slices(([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [0, 1, 1]))
    dicts = D.from_tensor_slices({"a": [1, 2, 3], "b": [[1], [2], [3]]})
    return [_list(pairs.batch(2)), spec(pairs.batch(2).element_spec), _list(dicts.batch(2)),
            spec(dicts.batch(2).element_spec)]


def case_unbatch_nested(tf):
    ds = tf.data.Dataset.from_tensor_slices(([1, 2, 3, 4], [5, 6, 7, 8])).batch(3).unbatch()
    return [_list(ds), spec(ds.element_spec)]


def case_padded_batch(tf):
    ds = tf.data.Dataset.range(1, 5).map(lambda x: tf.fill([x], x))
    return [_list(ds.padded_batch(2)), _list(ds.padded_batch(2, padded_shapes=[5])),
            _list(ds.padded_batch(3, padding_values=tf.constant(-1, tf.int64), drop_remainder=True)),
            spec(ds.padded_batch(2, padded_shapes=[5]).element_spec)]


def case_padded_batch_spec_from_signature(tf):
    ds = tf.data.Dataset.from_generator(lambda: ([1] * n for n in (1, 3)),
                                        output_signature=tf.TensorSpec((None,), tf.int32))
    return [spec(ds.padded_batch(2).element_spec), spec(ds.padded_batch(2, drop_remainder=True).element_spec)]


def case_map_element_spec_varying_shape(tf):
    """TF traces map_func: a dimension that varies between elements is None in the spec."""
    ds = tf.data.Dataset.range(1, 5).map(lambda x: tf.fill([x], x))
    return [spec(ds.element_spec), spec(ds.padded_batch(2).element_spec)]


def case_padded_batch_tuple(tf):
    ds = tf.data.Dataset.range(1, 4).map(lambda x: (tf.fill([x], x), x))
    return _list(ds.padded_batch(2, padded_shapes=([None], [])))


def case_rebatch(tf):
    ds = tf.data.Dataset.range(10).batch(4)
    return [_list(ds.rebatch(3)), _list(ds.rebatch(3, drop_remainder=True)), _list(ds.rebatch([1, 3])),
            _list(tf.data.Dataset.range(12).batch(6).rebatch([2, 1, 3]))]


def case_window_flat_map(tf):
    ds = tf.data.Dataset.range(7)
    return [_list(ds.window(3).flat_map(lambda w: w.batch(3))),
            _list(ds.window(3, shift=2, drop_remainder=True).flat_map(lambda w: w.batch(3))),
            _list(ds.window(2, shift=1, stride=2, drop_remainder=True).flat_map(lambda w: w.batch(2))),
            _list(ds.window(4, shift=3).flat_map(lambda w: w))]


def case_window_nested(tf):
    ds = tf.data.Dataset.from_tensor_slices(([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])).window(2, drop_remainder=True)
    return _list(ds.flat_map(lambda a, b: tf.data.Dataset.zip((a.batch(2), b.batch(2)))))


def case_window_dict(tf):
    ds = tf.data.Dataset.from_tensor_slices({"a": [1, 2, 3], "b": [4, 5, 6]}).window(2)
    return _list(ds.flat_map(lambda d: tf.data.Dataset.zip((d["a"].batch(2), d["b"].batch(2)))))


def case_window_is_dataset_of_datasets(tf):
    ds = tf.data.Dataset.range(5).window(2)
    first = next(iter(ds))
    return [type(ds.element_spec).__name__, val(ds.cardinality()), _list(first)]


def case_flat_map(tf):
    return _list(tf.data.Dataset.range(4).flat_map(lambda x: tf.data.Dataset.range(x)))


def case_interleave(tf):
    D = tf.data.Dataset
    make = lambda x: D.from_tensors(x).repeat(3)  # noqa: E731
    return [_list(D.range(1, 4).interleave(make, cycle_length=2, block_length=2)),
            _list(D.range(1, 4).interleave(make, cycle_length=1)),
            _list(D.range(1, 4).interleave(make, cycle_length=2, block_length=1, num_parallel_calls=tf.data.AUTOTUNE,
                                           deterministic=True)),
            _list(D.range(1, 5).interleave(lambda x: D.range(x), cycle_length=3))]


def case_zip_concatenate(tf):
    D = tf.data.Dataset
    a, b = D.range(3), D.range(10, 15)
    return [_list(D.zip((a, b))), _list(D.zip(a, b)), _list(D.zip({"x": a, "y": (b, a)})),
            _list(a.concatenate(b)), val(a.concatenate(b).cardinality()), val(D.zip((a, b)).cardinality())]


def case_concatenate_mismatch(tf):
    D = tf.data.Dataset
    return raises(D.range(3).concatenate, D.from_tensor_slices([1.0, 2.0]))


def case_repeat_forms(tf):
    ds = tf.data.Dataset.range(3)
    return [_list(ds.repeat(2)), _list(ds.repeat().take(7)), _list(ds.batch(2).repeat(2)),
            _list(ds.repeat(2).batch(2)), _list(ds.repeat(0))]


def case_cache_prefetch(tf):
    ds = tf.data.Dataset.range(5).map(lambda x: x + 1).cache().prefetch(tf.data.AUTOTUNE)
    return [_list(ds), _list(ds), _list(tf.data.Dataset.range(4).prefetch(1).batch(3).prefetch(2))]


def case_from_generator_signature(tf):
    def gen():
        for i in range(1, 4):
            yield i, [float(i)] * i
    ds = tf.data.Dataset.from_generator(gen, output_signature=(tf.TensorSpec(shape=(), dtype=tf.int32),
                                                                tf.TensorSpec(shape=(None,), dtype=tf.float32)))
    return [_list(ds), spec(ds.element_spec), val(ds.cardinality()), _list(ds.padded_batch(2))]


def case_from_generator_args(tf):
    def gen(n):
        for i in range(int(n)):
            yield {"i": i}
    ds = tf.data.Dataset.from_generator(gen, args=(3,), output_signature={"i": tf.TensorSpec((), tf.int64)})
    return [_list(ds), _list(ds)]


def case_from_generator_bad_value(tf):
    def gen():
        yield [1, 2]
    ds = tf.data.Dataset.from_generator(gen, output_signature=tf.TensorSpec(shape=(3,), dtype=tf.int32))
    return raises(lambda: list(ds))


def case_as_numpy_iterator(tf):
    ds = tf.data.Dataset.from_tensor_slices(({"a": [1, 2]}, [3.5, 4.5]))
    out = list(ds.as_numpy_iterator())
    return [[type(a["a"]).__name__, type(b).__name__] for a, b in out] + [val(out)]


def case_reduce(tf):
    D = tf.data.Dataset
    return [val(D.range(5).reduce(tf.constant(0, tf.int64), lambda s, x: s + x)),
            val(D.range(5).reduce(tf.constant(0, tf.int64), lambda s, _: s + 1)),
            val(D.from_tensor_slices([1.0, 2.0, 3.0]).reduce((tf.constant(0.0), tf.constant(1.0)),
                                                           lambda s, x: (s[0] + x, s[1] * x)))]


def case_shuffle_buffer_one(tf):
    return _list(tf.data.Dataset.range(6).shuffle(1))


def case_shuffle_properties(tf):
    """Permutation, reshuffled each epoch, equal for equal seeds, fixed without reshuffle."""
    ds = tf.data.Dataset.range(20)
    reshuffled = ds.shuffle(20, seed=7)
    fixed = ds.shuffle(20, seed=7, reshuffle_each_iteration=False)
    e1, e2 = _list(reshuffled), _list(reshuffled)
    f1, f2 = _list(fixed), _list(fixed)
    same_seed = _list(ds.shuffle(20, seed=7)) == _list(ds.shuffle(20, seed=7))
    return [sorted(e1) == list(range(20)), e1 != e2, sorted(e2) == list(range(20)), f1 == f2, same_seed,
            e1 != list(range(20)), sorted(_list(ds.shuffle(5).batch(20))[0]) == list(range(20))]


def case_shuffle_then_repeat_epochs(tf):
    epochs = _list(tf.data.Dataset.range(6).shuffle(6, seed=1).repeat(3).batch(6))
    return [all(sorted(e) == list(range(6)) for e in epochs), len(epochs)]


def case_bucket_by_sequence_length(tf):
    ds = tf.data.Dataset.from_generator(lambda: ([1] * n for n in (1, 5, 2, 6, 3, 7, 1)),
                                        output_signature=tf.TensorSpec((None,), tf.int32))
    bucketed = ds.bucket_by_sequence_length(lambda x: tf.shape(x)[0], bucket_boundaries=[3, 6],
                                            bucket_batch_sizes=[2, 2, 2])
    return _list(bucketed)


def case_bucket_by_sequence_length_pad_to_bucket(tf):
    ds = tf.data.Dataset.from_generator(lambda: ([2] * n for n in (1, 4, 2, 5)),
                                        output_signature=tf.TensorSpec((None,), tf.int32))
    bucketed = ds.bucket_by_sequence_length(lambda x: tf.shape(x)[0], bucket_boundaries=[3, 6],
                                            bucket_batch_sizes=[2, 2, 2], pad_to_bucket_boundary=True,
                                            padding_values=-1, drop_remainder=True)
    return _list(bucketed)


def case_take_while_scan_unique(tf):
    D = tf.data.Dataset
    return [_list(D.range(10).take_while(lambda x: x < 4)),
            _list(D.range(5).scan(tf.constant(0, tf.int64), lambda s, x: (s + x, s * 10 + x))),
            _list(D.from_tensor_slices([1, 3, 1, 2, 3, 4]).unique())]


def case_get_single_element(tf):
    D = tf.data.Dataset
    return [val(D.range(5).batch(5).get_single_element()), raises(D.range(2).get_single_element),
            raises(D.range(0).get_single_element)]


def case_choose_from_datasets(tf):
    D = tf.data.Dataset
    choices = D.from_tensor_slices(tf.constant([0, 1, 1, 0], tf.int64))
    return [val(x) for x in D.choose_from_datasets([D.range(3), D.range(10, 13)], choices)]


def case_group_by_window(tf):
    ds = tf.data.Dataset.range(10).group_by_window(key_func=lambda x: x % 2, reduce_func=lambda k, w: w.batch(3),
                                                   window_size=3)
    return _list(ds)


def case_element_spec_dtypes(tf):
    ds = tf.data.Dataset.from_tensor_slices(([1.0, 2.0], tf.constant([3, 4], tf.int64), [True, False]))
    return spec(ds.element_spec)


def case_window_cardinality(tf):
    ds = tf.data.Dataset.range(10)
    return [val(ds.window(3).cardinality()), val(ds.window(3, shift=2).cardinality()),
            val(ds.window(3, shift=2, drop_remainder=True).cardinality()),
            val(ds.window(4, stride=3, drop_remainder=True).cardinality()),
            val(ds.window(20, drop_remainder=True).cardinality()), val(ds.repeat().window(2).cardinality())]


def case_window_shift_past_size(tf):
    return _list(tf.data.Dataset.range(10).window(2, shift=4).flat_map(lambda w: w.batch(2)))


def case_choose_from_datasets_keep_going(tf):
    D = tf.data.Dataset
    choices = D.from_tensor_slices(tf.constant([0, 1, 0, 0, 1, 1], tf.int64))
    return [_list(D.choose_from_datasets([D.range(2), D.range(10, 13)], choices)),
            _list(D.choose_from_datasets([D.range(2), D.range(10, 13)], choices, stop_on_empty_dataset=False))]


def case_sample_from_datasets_properties(tf):
    D = tf.data.Dataset
    sampled = D.sample_from_datasets([D.range(5), D.range(10, 15)], weights=[0.5, 0.5], seed=3)
    first = _list(sampled)
    ones = _list(D.sample_from_datasets([D.range(3), D.range(10, 13)], weights=[1.0, 0.0]))
    return [sorted(first), first == _list(sampled), val(sampled.cardinality()), ones]


def case_scan_python_state(tf):
    return _list(tf.data.Dataset.range(4).scan(0, lambda s, x: (s + 1, x * 2)))


def case_group_by_window_size_func(tf):
    ds = tf.data.Dataset.range(12).group_by_window(key_func=lambda x: x % 3, reduce_func=lambda k, w: w.batch(4),
                                                   window_size_func=lambda k: k + 1)
    return _list(ds)


def case_bucket_no_padding(tf):
    ds = tf.data.Dataset.range(8).bucket_by_sequence_length(lambda x: tf.cast(x, tf.int32), bucket_boundaries=[4],
                                                            bucket_batch_sizes=[3, 2], no_padding=True)
    return _list(ds)


def case_experimental_apply_forms(tf):
    x = tf.data.experimental
    D = tf.data.Dataset
    return [_list(D.range(5).apply(x.take_while(lambda v: v < 2))), _list(D.range(3).batch(2).apply(x.unbatch())),
            _list(D.from_tensor_slices([2, 2, 1]).apply(x.unique())),
            _list(D.range(3).apply(x.scan(tf.constant(0, tf.int64), lambda s, v: (s + v, s)))),
            _list(D.range(3).apply(x.enumerate_dataset(start=1))), val(x.get_single_element(D.range(1)))]


def case_bad_arguments(tf):
    D = tf.data.Dataset
    return [raises(lambda: list(D.range(3).batch(0))), raises(lambda: list(D.range(3).shuffle(0))),
            raises(lambda: list(D.range(3).take(-2))), raises(lambda: list(D.range(3).shard(2, 2))),
            raises(lambda: list(D.range(3).shard(0, 0))), raises(lambda: list(D.range(3).window(2, shift=0))),
            raises(lambda: list(D.range(3).rebatch(2))), raises(lambda: list(D.range(3).prefetch(-5)))]


def case_padded_batch_python_padding_and_dict(tf):
    ds = tf.data.Dataset.from_generator(lambda: ({"t": [1] * n, "n": n} for n in (1, 3)),
                                        output_signature={"t": tf.TensorSpec((None,), tf.int64),
                                                          "n": tf.TensorSpec((), tf.int64)})
    return [_list(ds.padded_batch(2)), _list(ds.padded_batch(2, padding_values={"t": tf.constant(-1, tf.int64),
                                                                                 "n": tf.constant(0, tf.int64)}))]


def case_reduce_python_initial(tf):
    D = tf.data.Dataset
    return [raises(D.range(3).reduce, 0, lambda s, x: s + x),
            raises(lambda: list(D.range(3).scan(0, lambda s, x: (s + x, s)))),
            val(D.from_tensor_slices([1, 2, 3]).reduce(0, lambda s, x: s + x)),
            val(D.range(3).reduce(tf.constant(0, tf.int64), lambda s, _: s + 1))]


def case_global_seed_shuffle_reproducible(tf):
    ds = tf.data.Dataset.range(20)
    tf.random.set_seed(11)
    a = _list(ds.shuffle(20))
    tf.random.set_seed(11)
    b = _list(ds.shuffle(20))
    return [a == b, sorted(a) == list(range(20))]


def case_iterator_after_end(tf):
    it = iter(tf.data.Dataset.range(1))
    first = val(next(it))
    return [first, raises(next, it), raises(next, it), raises(it.get_next), bool(it.get_next_as_optional().has_value())]


def case_cache_partial_then_full(tf):
    ds = tf.data.Dataset.range(5).map(lambda x: x * 3).cache()
    partial = _list(ds.take(2))
    return [partial, _list(ds), _list(ds)]


def case_shuffle_repeat_order_of_ops(tf):
    """shuffle().repeat() reshuffles per epoch, each epoch a permutation; repeat().shuffle() mixes epochs."""
    epochs = [_list(tf.data.Dataset.range(5).shuffle(5, seed=2).repeat(2))[i * 5:(i + 1) * 5] for i in range(2)]
    mixed = _list(tf.data.Dataset.range(5).repeat(2).shuffle(10, seed=2))
    return [[sorted(e) for e in epochs], sorted(mixed)]


def case_zip_unequal_and_nested_spec(tf):
    D = tf.data.Dataset
    z = D.zip((D.range(5), D.from_tensor_slices(([1.0, 2.0], [[1], [2]]))))
    return [_list(z), spec(z.element_spec), val(z.cardinality())]


def case_interleave_from_tensor_slices(tf):
    D = tf.data.Dataset
    files = D.from_tensor_slices([[1, 2, 3], [10, 20, 30], [100, 200, 300]])
    return _list(files.interleave(lambda row: D.from_tensor_slices(row), cycle_length=3, block_length=1))


def case_filter_python_bool_and_tensor(tf):
    D = tf.data.Dataset
    return [_list(D.range(6).filter(lambda x: tf.math.equal(x % 2, 0))),
            _list(D.from_tensor_slices(([1, 2, 3], [True, False, True])).filter(lambda x, keep: keep))]


def case_unbatch_of_unbatched(tf):
    D = tf.data.Dataset
    return [raises(lambda: D.range(3).unbatch()),
            raises(lambda: D.range(4).map(lambda x: (x, tf.zeros([2]))).unbatch()),
            raises(lambda: list(D.range(3).take(-2))), _list(D.range(3).take(-2)), _list(D.range(3).skip(-2)),
            _list(D.range(2).repeat(-3).take(5)), val(D.range(3).repeat(-3).cardinality())]


def case_scan_state_must_keep_dtype_and_structure(tf):
    D = tf.data.Dataset
    return [raises(lambda: list(D.range(3).scan(tf.constant(0, tf.int32), lambda s, x: (s + x, s)))),
            raises(lambda: list(D.range(3).scan(tf.constant(0, tf.int64), lambda s, x: ((s, s), s)))),
            raises(lambda: D.range(3).reduce(tf.constant(0.0), lambda s, x: (s, s))),
            val(D.range(3).reduce(tf.constant(0, tf.int32), lambda s, x: s + 1))]


def case_batch_then_cardinality_of_generator(tf):
    ds = tf.data.Dataset.from_generator(lambda: iter(range(5)), output_signature=tf.TensorSpec((), tf.int64))
    asserted = ds.apply(tf.data.experimental.assert_cardinality(5))
    return [val(ds.batch(2).cardinality()), val(asserted.batch(2).cardinality())]


def case_shape_errors(tf):
    D = tf.data.Dataset
    ragged = D.from_generator(lambda: ([1] * n for n in (1, 2)), output_signature=tf.TensorSpec((None,), tf.int32))
    return [raises(lambda: list(ragged.batch(2))),
            raises(D.from_tensor_slices, [[1, 2], [3]]), raises(D.from_tensor_slices, ([1, 2], [1, 2, 3])),
            raises(lambda: D.zip((D.range(2), [1, 2]))),
            raises(lambda: D.range(3).map(lambda x: x, num_parallel_calls=0))]


def case_from_tensors_and_slices(tf):
    D = tf.data.Dataset
    return [_list(D.from_tensors([1, 2, 3])), val(D.from_tensors([1, 2, 3]).cardinality()),
            spec(D.from_tensors(([1.0], {"k": [[1, 2]]})).element_spec), _list(D.from_tensor_slices([[1, 2], [3, 4]])),
            _list(D.from_tensor_slices({"a": [1, 2], "b": [[1.0, 2.0], [3.0, 4.0]]}))]


def case_options_and_determinism(tf):
    options = tf.data.Options()
    options.deterministic = False
    options.threading.private_threadpool_size = 2
    ds = tf.data.Dataset.range(8).map(lambda x: x * 2, num_parallel_calls=4).with_options(options)
    out = _list(ds)
    return [sorted(out), ds.options().deterministic, ds.options().threading.private_threadpool_size,
            tf.data.Options().deterministic,
            _list(tf.data.Dataset.range(8).map(lambda x: x + 1, num_parallel_calls=4, deterministic=False).batch(8))[0]
            != []]


def case_numpy_inputs_keep_dtypes(tf):
    import numpy as np
    D = tf.data.Dataset
    ds = D.from_tensor_slices((np.array([1.0, 2.0]), np.array([1, 2], dtype=np.int64), np.array([1, 2], dtype=np.int32),
                               np.array([0.5, 1.5], dtype=np.float32), [1.0, 2.0], [1, 2], [True, False]))
    out = list(ds.as_numpy_iterator())
    return [spec(ds.element_spec), [type(v).__name__ for v in out[0]], val(out[1])]


def case_batch_map_vectorized(tf):
    ds = tf.data.Dataset.from_tensor_slices(({"x": [1.0, 2.0, 3.0]}, [0, 1, 0])).batch(2)
    return _list(ds.map(lambda f, y: ({"x2": f["x"] * 2.0}, y + 1), num_parallel_calls=tf.data.AUTOTUNE))


def case_list_files_sorted_text_lines(tf):
    import os
    import tempfile
    folder = tempfile.mkdtemp()
    for name, lines in (("b.csv", "h\n3\n4\n"), ("a.csv", "h\n1\n2\n")):
        with open(os.path.join(folder, name), "w") as f:
            f.write(lines)
    files = tf.data.Dataset.list_files(os.path.join(folder, "*.csv"), shuffle=False)
    lines = files.interleave(lambda p: tf.data.TextLineDataset(p).skip(1), cycle_length=1)
    decode = lambda b: b.decode() if isinstance(b, bytes) else b  # noqa: E731
    return [[os.path.basename(decode(x)) for x in files.as_numpy_iterator()],
            [decode(x) for x in lines.as_numpy_iterator()], val(files.cardinality())]


def case_shuffle_seeded_epoch_sequences(tf):
    """Equal seeds give equal sequences of epochs (each epoch reshuffled); repeat() reshuffles too."""
    ds = tf.data.Dataset.range(12)
    a, b = ds.shuffle(12, seed=5), ds.shuffle(12, seed=5)
    epochs_a, epochs_b = [_list(a), _list(a)], [_list(b), _list(b)]
    repeated = _list(ds.shuffle(12, seed=5).repeat(2))
    fixed = _list(ds.shuffle(12, seed=5, reshuffle_each_iteration=False).repeat(2))
    return [epochs_a == epochs_b, epochs_a[0] != epochs_a[1], repeated[:12] != repeated[12:],
            sorted(repeated[12:]) == list(range(12)), fixed[:12] == fixed[12:]]
