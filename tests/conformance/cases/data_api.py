"""The tf.data.Dataset API reference's examples (interleave, zip, take_while, scan, rebatch,
group_by_window, bucket_by_sequence_length, cardinality, iterators, options...), typed as printed
with ``tf.`` -> ``md.``, observing elements, element_spec, cardinalities and error types together."""

import numpy as np

from conformance_support import card, catches, elements, raises, spec, typed


def case_interleave(tf):
    dataset = tf.data.Dataset.range(1, 6)
    blocks = dataset.interleave(lambda x: tf.data.Dataset.from_tensors(x).repeat(6), cycle_length=2, block_length=4)
    default = tf.data.Dataset.range(1, 3).interleave(lambda x: tf.data.Dataset.range(10 * x, 10 * x + 2))
    parallel = dataset.interleave(lambda x: tf.data.Dataset.from_tensors(x).repeat(2), cycle_length=3,
                                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    uneven = tf.data.Dataset.range(1, 4).interleave(lambda x: tf.data.Dataset.range(x), cycle_length=2)
    return {"blocks": elements(blocks), "default": elements(default), "parallel": elements(parallel),
            "uneven": elements(uneven), "spec": spec(blocks.element_spec), "card": card(blocks)}


def case_interleave_map_func_not_a_dataset(tf):
    return raises(lambda: list(tf.data.Dataset.range(3).interleave(lambda x: x, cycle_length=1)))


def case_zip_concatenate(tf):
    a = tf.data.Dataset.range(1, 4)
    b = tf.data.Dataset.range(4, 7)
    c = tf.data.Dataset.range(7, 13).batch(2)
    d = tf.data.Dataset.range(13, 15)
    z = tf.data.Dataset.zip((a, b))
    z3 = tf.data.Dataset.zip((a, b, c))
    zd = tf.data.Dataset.zip((a, d))
    zpos = tf.data.Dataset.zip(a, b)
    zdict = tf.data.Dataset.zip({"x": a, "y": b})
    cat = a.concatenate(b)
    return {"zip": elements(z), "zip3": elements(z3), "zip_short": elements(zd), "zip_positional": elements(zpos),
            "zip_dict": elements(zdict), "zip_dict_spec": spec(zdict.element_spec), "zip_card": card(zd),
            "concat": elements(cat), "concat_card": card(cat), "concat_spec": spec(cat.element_spec),
            "concat_types": raises(lambda: a.concatenate(tf.data.Dataset.from_tensor_slices(["a"]))),
            "concat_shapes_spec": spec(tf.data.Dataset.from_tensors([1]).concatenate(
                tf.data.Dataset.from_tensors([1, 2])).element_spec)}


def case_take_skip_filter_enumerate(tf):
    ds = tf.data.Dataset.range(10)
    tw = ds.take_while(lambda x: x < 5)
    f = ds.filter(lambda x: x % 2 == 0)
    f2 = tf.data.Dataset.from_tensor_slices([1, 2, 3]).filter(lambda x: tf.math.equal(x, 1))
    e = tf.data.Dataset.from_tensor_slices([1, 2, 3]).enumerate(start=5)
    e2 = tf.data.Dataset.from_tensor_slices([(7, 8), (9, 10)]).enumerate()
    return {"take": elements(ds.take(3)), "take_all": len(elements(ds.take(-1))), "skip": elements(ds.skip(7)),
            "skip_all": elements(ds.skip(-1)), "take_more": card(ds.take(20)), "skip_more": card(ds.skip(20)),
            "take_while": elements(tw), "take_while_card": card(tw), "filter": elements(f), "filter_card": card(f),
            "filter_equal": elements(f2), "enumerate": elements(e), "enumerate_spec": spec(e.element_spec),
            "enumerate_pairs": elements(e2), "enumerate_pairs_spec": spec(e2.element_spec),
            "filter_not_bool": raises(lambda: list(ds.filter(lambda x: x))),
            "take_while_not_bool": raises(lambda: list(ds.take_while(lambda x: x)))}


def case_reduce_scan(tf):
    ds = tf.data.Dataset.range(5)
    count_ = ds.reduce(np.int64(0), lambda x, _: x + 1)
    total = ds.reduce(np.int64(0), lambda x, y: x + y)
    pair = ds.reduce((np.int64(0), np.int64(1)), lambda s, x: (s[0] + x, s[1] * (x + 1)))
    initial_state = tf.constant(0, dtype=tf.int64)
    scanned = tf.data.Dataset.range(10).scan(initial_state=initial_state, scan_func=lambda state, i: (state + i,
                                                                                                       state + i))
    empty = tf.data.Dataset.range(0).reduce(np.int64(3), lambda s, x: s + x)
    return {"count": typed(count_), "total": typed(total), "pair": typed(pair), "scan": elements(scanned),
            "scan_spec": spec(scanned.element_spec), "scan_card": card(scanned), "empty": typed(empty),
            "dtype_change": raises(lambda: ds.reduce(np.int64(0), lambda s, x: tf.cast(s + x, tf.float32))),
            "scan_dtype_change": raises(lambda: list(ds.scan(np.int64(0), lambda s, x: (tf.cast(s, tf.float32), x))))}


def case_unbatch_rebatch(tf):
    elements = [[1, 2, 3], [1, 2], [1, 2, 3, 4]]
    ds = tf.data.Dataset.from_generator(lambda: elements, tf.int64)
    u = ds.unbatch()
    fixed = tf.data.Dataset.range(6).batch(2).unbatch()
    r3 = tf.data.Dataset.range(6).batch(2).rebatch(3)
    r5 = tf.data.Dataset.range(6).batch(2).rebatch(5)
    rl = tf.data.Dataset.range(8).batch(4).rebatch([2, 1, 1])
    rd = tf.data.Dataset.range(6).batch(2).rebatch(4, drop_remainder=True)
    return {"unbatch": elements(u), "unbatch_spec": spec(u.element_spec), "gen_spec": spec(ds.element_spec),
            "fixed_spec": spec(fixed.element_spec), "fixed_card": card(fixed), "rebatch3": elements(r3),
            "rebatch3_spec": spec(r3.element_spec), "rebatch5": elements(r5), "rebatch_list": elements(rl),
            "rebatch_drop": elements(rd), "rebatch_drop_spec": spec(rd.element_spec),
            "unbatch_scalar": raises(lambda: tf.data.Dataset.range(3).unbatch())}


def case_group_by_window(tf):
    dataset = tf.data.Dataset.range(10)
    window_size = 5
    grouped = dataset.group_by_window(key_func=lambda x: x % 2, reduce_func=lambda key, ds: ds.batch(window_size),
                                      window_size=window_size)
    small = tf.data.Dataset.range(10).group_by_window(lambda x: x % 3, lambda key, ds: ds.batch(10), window_size=2)
    return {"grouped": elements(grouped), "spec": spec(grouped.element_spec), "small": elements(small),
            "both_sizes": raises(lambda: dataset.group_by_window(lambda x: x % 2, lambda k, d: d, window_size=2,
                                                                window_size_func=lambda k: np.int64(2)))}


def case_bucket_by_sequence_length(tf):
    dataset = _guide_elements(tf)
    b1 = dataset.bucket_by_sequence_length(element_length_func=lambda elem: tf.shape(elem)[0],
                                           bucket_boundaries=[3, 5], bucket_batch_sizes=[2, 2, 2])
    short = dataset.filter(lambda elem: tf.shape(elem)[0] < 5)
    b2 = short.bucket_by_sequence_length(element_length_func=lambda elem: tf.shape(elem)[0],
                                         bucket_boundaries=[3, 5], bucket_batch_sizes=[2, 2, 2],
                                         pad_to_bucket_boundary=True, padding_values=np.int64(-1))
    b3 = dataset.bucket_by_sequence_length(lambda elem: tf.shape(elem)[0], [3, 5], [2, 2, 2], drop_remainder=True)
    return {"default": elements(b1), "spec": spec(b1.element_spec), "to_boundary": elements(b2),
            "to_boundary_spec": spec(b2.element_spec), "drop": elements(b3), "drop_spec": spec(b3.element_spec),
            "sizes_mismatch": raises(lambda: dataset.bucket_by_sequence_length(lambda e: tf.shape(e)[0], [3, 5], [2]))}


def _guide_elements(tf):
    elements = [[0], [1, 2, 3, 4], [5, 6, 7], [7, 8, 9, 10, 11], [13, 14, 15, 16, 19, 20], [21, 22]]
    return tf.data.Dataset.from_generator(lambda: elements, tf.int64, output_shapes=[None])


def case_bucket_longer_than_last_boundary(tf):
    """The API docs' pad_to_bucket_boundary example itself: lengths 5 and 6 are not below 5."""
    dataset = _guide_elements(tf).bucket_by_sequence_length(lambda elem: tf.shape(elem)[0], [3, 5], [2, 2, 2],
                                                            pad_to_bucket_boundary=True)
    return raises(lambda: list(dataset))


def case_bucket_python_int_padding_of_int64(tf):
    return raises(lambda: list(_guide_elements(tf).bucket_by_sequence_length(
        lambda e: tf.shape(e)[0], [3, 5], [2, 2, 2], padding_values=-1)))


def case_cache(tf):
    calls = []

    def gen():
        calls.append(1)
        yield from range(5)
    ds = tf.data.Dataset.from_generator(gen, output_signature=tf.TensorSpec((), tf.int64)).cache()
    first, second = elements(ds), elements(ds)
    mapped = tf.data.Dataset.range(5).map(lambda x: x * x).cache()
    return {"first": first, "second": second, "generator_calls": len(calls), "spec": spec(ds.element_spec),
            "mapped": [elements(mapped), elements(mapped)], "mapped_card": card(mapped)}


def case_cardinality(tf):
    dataset = tf.data.Dataset.range(42)
    inf = dataset.repeat()
    unk = dataset.filter(lambda x: True)

    def length(ds):
        try:
            return len(ds)
        except Exception as exc:   # noqa: BLE001
            return type(exc).__name__
    return {"range": card(dataset), "repeat": card(inf), "filter": card(unk),
            "is_infinite": bool(inf.cardinality() == tf.data.INFINITE_CARDINALITY),
            "is_unknown": bool(unk.cardinality() == tf.data.UNKNOWN_CARDINALITY),
            "constants": [int(tf.data.INFINITE_CARDINALITY), int(tf.data.UNKNOWN_CARDINALITY)],
            "experimental": int(tf.data.experimental.cardinality(dataset)),
            "len": length(dataset), "len_infinite": length(inf), "len_unknown": length(unk),
            "batch": card(dataset.batch(5)), "batch_drop": card(dataset.batch(5, drop_remainder=True)),
            "repeat3": card(dataset.repeat(3)), "shard": card(dataset.shard(5, 3)), "take_inf": card(inf.take(4)),
            "skip_inf": card(inf.skip(4)), "map": card(dataset.map(lambda x: x)), "zip_inf": card(
                tf.data.Dataset.zip((dataset, inf))), "concat_unknown": card(dataset.concatenate(unk)),
            "repeat0": card(dataset.repeat(0)), "empty_repeat": card(dataset.take(0).repeat()),
            "unknown_repeat": card(unk.repeat()), "interleave": card(dataset.interleave(
                lambda x: tf.data.Dataset.from_tensors(x))), "padded": card(dataset.padded_batch(4)),
            "assert": card(unk.apply(tf.data.experimental.assert_cardinality(42)))}


def case_as_numpy_iterator(tf):
    ints = list(tf.data.Dataset.range(3).as_numpy_iterator())
    strs = list(tf.data.Dataset.from_tensor_slices(["a", "bc"]).as_numpy_iterator())
    floats = list(tf.data.Dataset.from_tensor_slices([1.5, 2.5]).as_numpy_iterator())
    batches = list(tf.data.Dataset.range(4).batch(3).as_numpy_iterator())
    nested = list(tf.data.Dataset.from_tensor_slices({"a": ([1, 2], [3, 4]), "b": [5, 6]}).as_numpy_iterator())
    str_batch = list(tf.data.Dataset.from_tensor_slices(["a", "bc"]).batch(2).as_numpy_iterator())
    return {"int_types": [type(x).__name__ for x in ints], "ints": [x.item() for x in ints],
            "str_types": [type(x).__name__ for x in strs], "strs": [x.decode() for x in strs],
            "float_types": [type(x).__name__ for x in floats],
            "batch_types": [type(x).__name__ for x in batches], "batches": [typed(x) for x in batches],
            "nested": [typed(x) for x in nested], "nested_types": [type(x).__name__ for x in nested],
            "str_batch": [[b.decode() for b in x] for x in str_batch],
            "str_batch_types": [[type(x).__name__, type(x[0]).__name__, list(x.shape)] for x in str_batch]}


def case_iterator(tf):
    ds = tf.data.Dataset.range(2)
    it = iter(ds)
    first = it.get_next()
    second = next(it)
    opt = it.get_next_as_optional()
    it2 = iter(ds)
    opt2 = it2.get_next_as_optional()
    return {"first": typed(first), "second": typed(second), "has_value": bool(opt.has_value()),
            "get_value_empty": raises(opt.get_value), "next_at_end": raises(lambda: next(it)),
            "get_next_at_end": raises(it.get_next), "spec": spec(it.element_spec),
            "opt2": [bool(opt2.has_value()), typed(opt2.get_value())], "opt_spec": spec(opt2.element_spec),
            "for_after_partial": elements(it2), "fresh_iter": elements(ds)}


def case_map_unpacking(tf):
    pairs = tf.data.Dataset.from_tensor_slices(([1, 2], [10, 20]))
    dicts = tf.data.Dataset.from_tensor_slices({"a": [1, 2], "b": [3, 4]})
    nested = tf.data.Dataset.from_tensor_slices((([1, 2], [3, 4]), [5, 6]))
    added = pairs.map(lambda x, y: x + y)
    swapped = pairs.map(lambda x, y: (y, x))
    picked = dicts.map(lambda d: d["a"] * d["b"])
    to_dict = pairs.map(lambda x, y: {"sum": x + y, "x": x})
    nest = nested.map(lambda xy, z: xy[0] + xy[1] + z)
    as_list = pairs.map(lambda x, y: [x, y])
    const = pairs.map(lambda x, y: 3)
    parallel = tf.data.Dataset.range(6).map(lambda x: x * 2, num_parallel_calls=tf.data.AUTOTUNE)
    return {"added": elements(added), "added_spec": spec(added.element_spec), "swapped": elements(swapped),
            "picked": elements(picked), "to_dict": elements(to_dict), "to_dict_spec": spec(to_dict.element_spec),
            "nested": elements(nest), "as_list": elements(as_list), "as_list_spec": spec(as_list.element_spec),
            "const": [typed(e) for e in const], "parallel": elements(parallel),
            "wrong_arity": raises(lambda: list(pairs.map(lambda x: x))),
            "float_ops": elements(tf.data.Dataset.from_tensor_slices([1.0, 2.0]).map(lambda x: x / 2))}


def case_options(tf):
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    ds = tf.data.Dataset.range(4).with_options(options)
    policy = tf.data.experimental.AutoShardPolicy
    default = tf.data.Options()

    def bad_policy():
        tf.data.Options().experimental_distribute.auto_shard_policy = "DATA"

    def bad_attr():
        tf.data.Options().no_such_option = 1
    return {"policy": ds.options().experimental_distribute.auto_shard_policy.name,
            "after_map": ds.map(lambda x: x).options().experimental_distribute.auto_shard_policy.name,
            "members": {p.name: int(p.value) for p in policy}, "default_policy":
                default.experimental_distribute.auto_shard_policy.name,
            "deterministic_default": default.deterministic, "bad_policy": raises(bad_policy),
            "bad_attr": raises(bad_attr), "values": elements(ds)}


def case_options_fields(tf):
    """Every field of TF 2.21's Options, set and read back (multidev accepts the tuning knobs and runs
    as written), and the type checks of the newer ones."""
    options = tf.data.Options()
    options.autotune.enabled = False
    options.autotune.cpu_budget = 4
    options.autotune.ram_budget = 1 << 20
    options.autotune.autotune_algorithm = tf.data.experimental.AutotuneAlgorithm.HILL_CLIMB
    options.experimental_optimization.inject_prefetch = False
    options.experimental_optimization.map_parallelization = True
    options.threading.private_threadpool_size = 4
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    options.experimental_warm_start = True
    options.dataset_name = "train"
    ds = tf.data.Dataset.range(3).with_options(options).map(lambda x: x + 1)
    read = ds.options()
    set_to = {"enabled": 1, "autotune_algorithm": 1, "min_parallelism": 2.5}

    def bad(name):
        return raises(lambda: setattr(tf.data.Options().autotune, name, set_to[name]))
    return [read.autotune.enabled, read.autotune.cpu_budget, read.autotune.autotune_algorithm.name,
            read.experimental_optimization.inject_prefetch, read.threading.private_threadpool_size,
            read.experimental_external_state_policy.name, read.experimental_warm_start, read.dataset_name,
            [p.name for p in tf.data.experimental.AutotuneAlgorithm], elements(ds),
            [bad(name) for name in sorted(set_to)],
            raises(lambda: setattr(tf.data.Options(), "experimental_external_state_policy", 1)),
            raises(lambda: setattr(tf.data.Options(), "dataset_name", 5))]


def case_element_spec_shape(tf):
    """``element_spec.shape`` read as TF programs read a TensorShape."""
    s = tf.data.Dataset.zip((tf.data.Dataset.range(6), tf.data.Dataset.from_tensor_slices(
        np.zeros((6, 1, 2))))).batch(2).element_spec
    shape = s[0].shape
    return [shape.as_list(), shape.rank, shape.is_fully_defined(), len(shape), str(shape), shape == (None,),
            list(shape), s[1].shape.as_list(), s[1].shape[0], tf.data.Dataset.range(3).batch(
                3, drop_remainder=True).element_spec.shape.is_fully_defined()]


def case_cardinality_of_every_op(tf):
    """``cardinality()`` after each transformation over known, unknown (a generator) and infinite inputs."""
    D = tf.data.Dataset
    r = D.range(10)
    g = D.from_generator(lambda: iter(range(5)), output_signature=tf.TensorSpec((), tf.int64))
    datasets = {
        "unbatch_drop": r.batch(3, drop_remainder=True).unbatch(), "unbatch": r.batch(3).unbatch(),
        "rebatch": r.batch(3).rebatch(2), "rebatch_drop": r.batch(2, drop_remainder=True).rebatch(4, drop_remainder=True),
        "rebatch_list": r.batch(4, drop_remainder=True).rebatch([2, 2]), "prefetch": r.prefetch(1), "cache": r.cache(),
        "shuffle": r.shuffle(3), "map": r.map(lambda x: x), "enumerate": r.enumerate(),
        "scan": r.scan(tf.constant(0, tf.int64), lambda s, x: (s, x)), "gen_take": g.take(3), "gen_take0": g.take(0),
        "gen_skip": g.skip(2), "gen_batch": g.batch(2), "gen_repeat0": g.repeat(0),
        "take_while": r.take_while(lambda x: x < 3), "window": r.window(3),
        "window_drop": r.window(3, shift=2, drop_remainder=True),
        "group": r.group_by_window(lambda x: x % 2, lambda k, d: d.batch(2), window_size=2),
        "flat_map": r.flat_map(lambda x: D.from_tensors(x)),
        "interleave": r.interleave(lambda x: D.from_tensors(x), cycle_length=2), "unique": r.unique(),
        "shard_inf": r.repeat().shard(2, 0), "zip_gen": D.zip((r, g)), "concat_inf_gen": r.repeat().concatenate(g),
        "concat_gen_inf": g.concatenate(r.repeat()), "choose": D.choose_from_datasets([r, r], D.range(2).repeat(3)),
        "sample": D.sample_from_datasets([r, r], seed=1),
        "sample_stop": D.sample_from_datasets([r, r], seed=1, stop_on_empty_dataset=True),
        "padded_inf": r.repeat().padded_batch(2), "batch_inf_drop": r.repeat().batch(3, drop_remainder=True),
        "take_neg": r.repeat().take(-1), "skip_inf_all": r.repeat().skip(-1), "repeat_neg2": r.repeat(-2),
        "assert": r.apply(tf.data.experimental.assert_cardinality(10)),
        "bucket": r.map(lambda x: tf.fill([x], x)).bucket_by_sequence_length(lambda e: tf.shape(e)[0], [3], [2, 2]),
        "from_tensors": D.from_tensors(1), "range_empty": D.range(5, 2), "shard_uneven": r.shard(3, 2),
        "counter_take": D.counter().take(5),
    }
    return {name: card(ds) for name, ds in datasets.items()}


def case_element_spec_of_every_op(tf):
    """``element_spec`` (shapes and dtypes) after each transformation that needs no tracing of a function."""
    D = tf.data.Dataset
    r = D.range(10)
    m = D.from_tensor_slices(np.zeros((6, 3), np.float32))
    g = D.from_generator(lambda: iter([[1], [1, 2]]), output_signature=tf.TensorSpec((None,), tf.int32))
    p = D.from_tensor_slices(({"a": np.zeros((6, 2), np.int32)}, np.arange(6.0)))
    datasets = {
        "batch": m.batch(4), "batch_drop": m.batch(4, drop_remainder=True), "unbatch": m.batch(2).unbatch(),
        "padded": g.padded_batch(2), "padded_shapes": g.padded_batch(2, padded_shapes=[5]),
        "padded_drop": g.padded_batch(2, drop_remainder=True), "rebatch": m.batch(2).rebatch(3),
        "rebatch_drop": m.batch(2).rebatch(3, drop_remainder=True),
        "rebatch_list": m.batch(2).rebatch([1, 2], drop_remainder=True), "rebatch_unknown": g.rebatch(2),
        "shuffle": p.shuffle(3), "repeat": p.repeat(), "take": p.take(1), "enumerate": p.enumerate(),
        "zip": D.zip((r, m, p)), "zip_dict": D.zip({"r": r, "p": p}),
        "concat_shapes": m.batch(4, drop_remainder=True).concatenate(m.batch(2, drop_remainder=True)),
        "concat_none": m.batch(4).concatenate(m.batch(2, drop_remainder=True)), "cache": p.cache(),
        "prefetch": p.prefetch(2), "shard": p.shard(2, 1), "filter": p.filter(lambda d, y: y > 1),
        "take_while": p.take_while(lambda d, y: y < 3), "unique": r.unique(),
        "range_int32": D.range(3, output_type=tf.int32), "counter": D.counter(dtype=tf.int32),
        "from_tensors_dict": D.from_tensors({"x": [1.0, 2.0], "y": 3}),
        "slices_np_int": D.from_tensor_slices(np.arange(3)), "slices_float_list": D.from_tensor_slices([[1.0], [2.0]]),
        "slices_big_int": D.from_tensor_slices([1, 2**40]), "slices_bool_np": D.from_tensor_slices(np.array([True])),
        "slices_uint8": D.from_tensor_slices(np.zeros(3, np.uint8)), "slices_f16": D.from_tensor_slices(np.zeros(3, np.float16)),
        "slices_mixed_tuple": D.from_tensor_slices(([1, 2], [1.5, 2.5], [True, False])),
        "choose": D.choose_from_datasets([r, r], D.range(2)), "sample": D.sample_from_datasets([m, m]),
        "group": r.group_by_window(lambda x: x % 2, lambda k, d: d.batch(2, drop_remainder=True), window_size=2),
        "bucket_no_pad": g.bucket_by_sequence_length(lambda e: tf.shape(e)[0], [2], [2, 2], no_padding=True),
        "bucket_pad_shapes": g.bucket_by_sequence_length(lambda e: tf.shape(e)[0], [2], [2, 2], padded_shapes=[4]),
        "gen_types_only": D.from_generator(lambda: iter([1]), output_types=tf.int64),
        "gen_types_shapes": D.from_generator(lambda: iter([(1, [2.0])]), output_types=(tf.int64, tf.float32),
                                             output_shapes=((), (1,))),
        "flat_map_slices": g.flat_map(lambda x: D.from_tensor_slices(x)),
        "windows_batched": r.window(3, drop_remainder=True).flat_map(lambda w: w.batch(3, drop_remainder=True)),
    }
    return {name: spec(ds.element_spec) for name, ds in datasets.items()}


def case_bad_arguments_error_types(tf):
    """The exception a TF program's handler sees for wrong arguments (``raises``: the type's name;
    ``catches``: TF's type catches it, where multidev's error is TF's and a TypeError too)."""
    D = tf.data.Dataset
    r = D.range(5)
    names = {
        "batch0": lambda: list(r.batch(0)), "batch_neg": lambda: list(r.batch(-1)), "batch_float": lambda: list(r.batch(2.5)),
        "shuffle_neg": lambda: list(r.shuffle(-3)), "take_float": lambda: list(r.take(1.5)),
        "repeat_str": lambda: list(r.repeat("x")), "window0": lambda: list(r.window(0)),
        "window_shift0": lambda: list(r.window(2, shift=0)), "window_stride0": lambda: list(r.window(2, stride=0)),
        "shard0": lambda: list(r.shard(0, 0)), "shard_index": lambda: list(r.shard(2, 2)),
        "shard_neg": lambda: list(r.shard(2, -1)),
        "interleave_cycle0": lambda: list(r.interleave(lambda x: D.from_tensors(x), cycle_length=0)),
        "interleave_block0": lambda: list(r.interleave(lambda x: D.from_tensors(x), cycle_length=1, block_length=0)),
        "prefetch_neg": lambda: list(r.prefetch(-2)), "zip_not_dataset": lambda: D.zip((r, [1, 2])),
        "zip_empty": lambda: D.zip(()), "concat_struct": lambda: r.concatenate(D.zip((r, r))),
        "slices_empty_tuple": lambda: D.from_tensor_slices(()),
        "padded_wrong_struct": lambda: list(D.zip((r, r)).padded_batch(2, padded_shapes=([],))),
        "padded_rank": lambda: list(r.map(lambda x: tf.fill([x], x)).padded_batch(2, padded_shapes=[2, 2])),
        "batch_ragged": lambda: list(D.from_generator(lambda: iter([[1], [1, 2]]),
                                                      output_signature=tf.TensorSpec((None,), tf.int32)).batch(2)),
        "reduce_struct": lambda: r.reduce((np.int64(0), np.int64(0)), lambda s, x: s[0] + x),
        "get_single_many": lambda: r.get_single_element(), "get_single_none": lambda: r.take(0).get_single_element(),
        "assert_card_wrong": lambda: list(r.apply(tf.data.experimental.assert_cardinality(3))),
        "choose_bad_index": lambda: list(D.choose_from_datasets([r], D.range(2, 3))),
        "sample_bad_weights": lambda: list(D.sample_from_datasets([r, r], weights=[0.5])),
        "gen_not_callable": lambda: D.from_generator([1, 2], output_types=tf.int64),
        "range_float": lambda: list(D.range(2.5)), "range_step0": lambda: list(D.range(0, 5, 0)),
        "scan_bad_return": lambda: list(r.scan(np.int64(0), lambda s, x: s + x)),
        "len_of_unknown": lambda: len(r.filter(lambda x: True)),
    }
    value_errors = {
        "map_not_callable": lambda: r.map(3), "filter_not_callable": lambda: r.filter(None),
        "slices_none": lambda: D.from_tensor_slices(None), "slices_object": lambda: D.from_tensor_slices(object()),
        "group_key_float": lambda: list(r.group_by_window(lambda x: tf.cast(x, tf.float32), lambda k, d: d,
                                                          window_size=2)),
    }
    return [{k: raises(f) for k, f in names.items()}, {k: catches(f, ValueError) for k, f in value_errors.items()}]


def case_bad_arguments_tf_accidents(tf):
    """Wrong arguments where TF 2.21 fails by accident of its implementation (IndexError, AttributeError)
    or not at all (unsorted bucket boundaries); multidev says what is wrong (TypeError/ValueError)."""
    D = tf.data.Dataset
    r = D.range(5)
    return [raises(lambda: list(r.batch(2).rebatch([]))), raises(lambda: r.concatenate([1])),
            raises(lambda: list(r.take_while(lambda x: (x, x)))), raises(lambda: r.with_options(3)),
            raises(lambda: r.map(lambda x: tf.fill([x], x)).bucket_by_sequence_length(
                lambda e: tf.shape(e)[0], [3, 2], [1, 1, 1]))]
