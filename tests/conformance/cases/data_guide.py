"""The snippets of TensorFlow's guide "tf.data: Build TensorFlow input pipelines", the tf.data.Dataset API
examples and the "Distributed input" tutorial, typed as printed with ``tf.`` -> ``md.``: downloads become
small synthetic arrays (the Titanic CSV 628 lines of text), random data fixed numpy arrays; tf.random and
tf.strings, which multidev leaves to torch, are not used. A case observes elements, dtypes, element_spec,
cardinalities and error types together; deliberate differences are cases of their own (KNOWN in
test_conformance.py)."""

import numpy as np

from conformance_support import InTempDirectory, dtype_name, local, raises, spec, two_cpus, val


def typed(x):
    """An element with the dtype and shape of each component: ``[values, dtype, shape]`` leaves."""
    if isinstance(x, (tuple, list)):
        return [typed(v) for v in x]
    if isinstance(x, dict):
        return {k: typed(v) for k, v in x.items()}
    return [val(x), dtype_name(x), [int(d) for d in x.shape]]


def _list(ds, n=None):
    """The elements of ``ds`` (the first ``n``) as plain values."""
    out = []
    for i, e in enumerate(ds):
        if n is not None and i >= n:
            break
        out.append(val(e))
    return out


def texts(ds):
    """String elements, read through ``as_numpy_iterator`` (bytes on both sides)."""
    return [[b.decode() for b in x] if isinstance(x, (tuple, list)) else x.decode() for x in ds.as_numpy_iterator()]


def card(ds):
    """``ds.cardinality().numpy()`` as the API docs print it."""
    return int(ds.cardinality().numpy())


def dataset_spec(s):
    """A window's element_spec: DatasetSpec of the components' specs."""
    return [type(s).__name__, spec(s.element_spec)]


# ----------------------------------------------------------------------------------------- basic mechanics

def case_basic_mechanics(tf):
    dataset = tf.data.Dataset.from_tensor_slices([8, 3, 0, 8, 2, 1])
    it = iter(dataset)
    return {"elements": [typed(e) for e in dataset], "next": typed(next(it)),
            "reduce": typed(dataset.reduce(0, lambda state, value: state + value)),
            "spec": spec(dataset.element_spec), "cardinality": card(dataset)}


def case_dataset_structure(tf):
    dataset1 = tf.data.Dataset.from_tensor_slices(np.arange(40, dtype=np.float32).reshape(4, 10))
    dataset2 = tf.data.Dataset.from_tensor_slices(
        (np.arange(4, dtype=np.float32), np.arange(400, dtype=np.int32).reshape(4, 100)))
    dataset3 = tf.data.Dataset.zip((dataset1, dataset2))
    shapes = [[list(a.shape), list(b.shape), list(c.shape)] for a, (b, c) in dataset3]
    return {"spec1": spec(dataset1.element_spec), "spec2": spec(dataset2.element_spec),
            "spec3": spec(dataset3.element_spec), "shapes3": shapes, "first1": typed(next(iter(dataset1)))}


def case_from_tensor_slices_kinds(tf):
    d = tf.data.Dataset.from_tensor_slices({"a": [1, 2], "b": [[1.0, 2.0], [3.0, 4.0]]})
    t = tf.data.Dataset.from_tensor_slices(([1, 2, 3], ([7, 8, 9], [0.5, 1.5, 2.5])))
    words = tf.data.Dataset.from_tensor_slices((["x", "y"], ["z", "w"]))
    m = tf.data.Dataset.from_tensor_slices([[1, 2], [3, 4]])
    b = tf.data.Dataset.from_tensor_slices([True, False])
    f64 = tf.data.Dataset.from_tensor_slices(np.array([1.0, 2.0]))
    return {"dict": [typed(e) for e in d], "dict_spec": spec(d.element_spec),
            "nested": [typed(e) for e in t], "nested_spec": spec(t.element_spec),
            "words": texts(words), "words_spec": spec(words.element_spec),
            "matrix": [typed(e) for e in m], "bool_spec": spec(b.element_spec), "f64_spec": spec(f64.element_spec),
            "ragged_list": raises(lambda: tf.data.Dataset.from_tensor_slices([[1, 2], [3]])),
            "unequal_lengths": raises(lambda: tf.data.Dataset.from_tensor_slices(([1, 2, 3], [1, 2]))),
            "scalar": raises(lambda: tf.data.Dataset.from_tensor_slices(5)),
            "from_tensors_spec": spec(tf.data.Dataset.from_tensors([[1, 2], [3, 4]]).element_spec),
            "from_tensors_card": card(tf.data.Dataset.from_tensors([1, 2]))}


def case_numpy_arrays(tf):
    images = np.arange(4 * 28 * 28, dtype=np.uint8).reshape(4, 28, 28)
    labels = np.array([9, 0, 0, 3], dtype=np.uint8)
    images = images / 255
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    return {"spec": spec(dataset.element_spec), "card": card(dataset),
            "label_values": [val(y) for _, y in dataset]}


# ----------------------------------------------------------------------------------------- generators

def count(stop):
    i = 0
    while i < stop:
        yield i
        i += 1


def case_generator_count(tf):
    ds_counter = tf.data.Dataset.from_generator(count, args=[25], output_types=tf.int32, output_shapes=(), )
    batches = ds_counter.repeat().batch(10).take(10)
    return {"batches": _list(batches), "spec": spec(ds_counter.element_spec), "card": card(ds_counter),
            "card_repeat": card(ds_counter.repeat()), "card_batches": card(batches),
            "card_repeat_batch": card(ds_counter.repeat().batch(10))}


def gen_series():
    i = 0
    while True:
        size = i % 4
        yield i, np.arange(size, dtype=np.float64) + 0.5
        i += 1


def case_generator_series_padded(tf):
    ds_series = tf.data.Dataset.from_generator(gen_series, output_types=(tf.int32, tf.float32),
                                               output_shapes=((), (None,)))
    ds_series_batch = ds_series.padded_batch(5)
    ids, sequence_batch = next(iter(ds_series_batch))
    return {"spec": spec(ds_series.element_spec), "batch_spec": spec(ds_series_batch.element_spec),
            "ids": typed(ids), "sequence_batch": typed(sequence_batch)}


def case_generator_output_signature(tf):
    def gen():
        for i in range(3):
            yield i, np.full((i + 1,), i, dtype=np.float32)
    ds = tf.data.Dataset.from_generator(gen, output_signature=(
        tf.TensorSpec(shape=(), dtype=tf.int32), tf.TensorSpec(shape=(None,), dtype=tf.float32)))

    def wrong_shape():
        yield np.zeros((3,), np.float32)
    bad_shape = tf.data.Dataset.from_generator(wrong_shape, output_signature=tf.TensorSpec((2,), tf.float32))
    return {"elements": [typed(e) for e in ds], "spec": spec(ds.element_spec), "card": card(ds),
            "second_pass": len(list(ds)), "wrong_shape": raises(lambda: list(bad_shape)),
            "wrong_shape_as_optional": raises(lambda: iter(bad_shape).get_next_as_optional())}


def case_generator_wrong_structure(tf):
    """Raised here, not observed by ``raises``: multidev's error is TF's type and a TypeError."""
    def wrong_structure():
        yield 1, 2
    list(tf.data.Dataset.from_generator(wrong_structure, output_signature=tf.TensorSpec((), tf.int32)))


def case_generator_without_signature(tf):
    return raises(lambda: tf.data.Dataset.from_generator(lambda: iter([1, 2])))


# ----------------------------------------------------------------------------------------- batching

def case_simple_batching(tf):
    inc_dataset = tf.data.Dataset.range(100)
    dec_dataset = tf.data.Dataset.range(0, -100, -1)
    dataset = tf.data.Dataset.zip((inc_dataset, dec_dataset))
    batched_dataset = dataset.batch(4)
    dropped = dataset.batch(7, drop_remainder=True)
    return {"batches": _list(batched_dataset, 4), "spec": spec(batched_dataset.element_spec),
            "dropped_spec": spec(dropped.element_spec), "dropped_card": card(dropped),
            "card": card(batched_dataset), "last": _list(batched_dataset.skip(24)),
            "dropped_last": _list(dropped.skip(13))}


def case_padded_batch(tf):
    dataset = tf.data.Dataset.range(100)
    dataset = dataset.map(lambda x: tf.fill([tf.cast(x, tf.int32)], x))
    padded = dataset.padded_batch(4, padded_shapes=(None,))
    fixed = dataset.take(3).padded_batch(2, padded_shapes=(5,), padding_values=tf.constant(-1, tf.int64))
    implicit = dataset.take(3).padded_batch(2, padding_values=tf.constant(7, tf.int64), drop_remainder=True)
    pairs = tf.data.Dataset.from_tensor_slices([1, 2, 3]).map(lambda x: (tf.fill([x], x), tf.fill([2], x)))
    pair_batch = pairs.padded_batch(3, padded_shapes=([4], [None]), padding_values=(0, -1))
    dicts = tf.data.Dataset.from_tensor_slices([1, 2]).map(lambda x: {"v": tf.fill([x], 1.0)})
    return {"batches": _list(padded, 2), "spec": spec(padded.element_spec),
            "fixed": _list(fixed), "fixed_spec": spec(fixed.element_spec), "implicit": _list(implicit),
            "pairs": _list(pair_batch),
            "pairs_spec": spec(pair_batch.element_spec), "dicts": _list(dicts.padded_batch(2))}


def case_padded_shapes_smaller_than_an_element(tf):
    """Raised here: multidev's error is TF's DataLossError and InvalidArgumentError."""
    dataset = tf.data.Dataset.range(100).map(lambda x: tf.fill([tf.cast(x, tf.int32)], x))
    list(dataset.take(4).padded_batch(2, padded_shapes=(2,)))


def case_padded_batch_guide_specs(tf):
    """The guide's map to value-dependent lengths: TF traces map_func (length None), multidev runs it
    on the first element (length 0), and padded_batch without padded_shapes keeps that."""
    dataset = tf.data.Dataset.range(100).map(lambda x: tf.fill([tf.cast(x, tf.int32)], x))
    implicit = dataset.take(3).padded_batch(2, padding_values=tf.constant(7, tf.int64), drop_remainder=True)
    return [spec(dataset.element_spec), spec(implicit.element_spec)]


# ----------------------------------------------------------------------------------------- training workflows

LINES = [f"line {i}" for i in range(628)]


def case_epochs_and_batch_sizes(tf):
    titanic_lines = tf.data.Dataset.from_tensor_slices(LINES)
    repeat_then_batch = [int(b.shape[0]) for b in titanic_lines.repeat(3).batch(128)]
    batch_then_repeat = [int(b.shape[0]) for b in titanic_lines.batch(128).repeat(3)]
    dataset = titanic_lines.batch(128)
    epochs = []
    for _ in range(3):
        epochs.append([int(batch.shape[0]) for batch in dataset])
    counter = tf.data.Dataset.counter()
    zipped = tf.data.Dataset.zip((counter, titanic_lines))
    n, line_batch = next(iter(zipped.shuffle(buffer_size=100).batch(20)))
    shuffled = zipped.shuffle(buffer_size=100).batch(10).repeat(2)
    shuffled_sizes = [int(n.shape[0]) for n, _ in shuffled]
    first_epoch = sorted(int(i) for n, _ in list(shuffled)[:63] for i in n.numpy())
    repeated = zipped.repeat(2).shuffle(buffer_size=100).batch(10)
    repeated_sizes = [int(n.shape[0]) for n, _ in repeated]
    return {"repeat_then_batch": repeat_then_batch, "batch_then_repeat": batch_then_repeat, "epochs": epochs,
            "first_shuffled_batch_within_buffer": bool(max(n.numpy()) < 120),
            "spec": spec(zipped.element_spec), "shuffled_sizes": shuffled_sizes,
            "shuffle_keeps_epochs_apart": first_epoch == list(range(628)), "repeated_sizes": repeated_sizes,
            "card_shuffled": card(shuffled), "card_repeated": card(repeated), "counter_card": card(counter),
            "line_batch": len(line_batch), "batch_spec": spec(zipped.batch(20).element_spec)}


def case_experimental_counter(tf):
    """The guide's Titanic section writes tf.data.experimental.Counter() (deprecated, still in 2.21)."""
    counter = tf.data.experimental.Counter()
    return [_list(counter.take(3)), spec(counter.element_spec), card(counter),
            _list(tf.data.experimental.Counter(start=2, step=-1, dtype=tf.int32).take(3))]


def case_iterator_checkpointing(tf):
    range_ds = tf.data.Dataset.range(20)
    iterator = iter(range_ds)
    with InTempDirectory():
        ckpt = tf.train.Checkpoint(step=tf.Variable(0), iterator=iterator)
        manager = tf.train.CheckpointManager(ckpt, "my_ckpt", max_to_keep=3)
        first = [val(next(iterator).numpy()) for _ in range(5)]
        manager.save()
        second = [val(next(iterator).numpy()) for _ in range(5)]
        ckpt.restore(manager.latest_checkpoint)
        third = [val(next(iterator).numpy()) for _ in range(5)]
    return [first, second, third]


def case_keras_fit_evaluate_predict(tf):
    """The guide's "Using tf.data with tf.keras" (Fashion-MNIST -> 400 synthetic 28x28 images): steps
    of repeated datasets, predict on (images, labels) batches and on images only."""
    images = (np.arange(400 * 28 * 28) % 251).reshape(400, 28, 28) / 255.0
    labels = (np.arange(400) % 10).astype(np.int32)
    fmnist_train_ds = tf.data.Dataset.from_tensor_slices((images, labels))
    fmnist_train_ds = fmnist_train_ds.shuffle(5000, seed=0).batch(32)
    model = tf.keras.Sequential([tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)])
    model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    h1 = model.fit(fmnist_train_ds, epochs=2, verbose=0)
    h2 = model.fit(fmnist_train_ds.repeat(), epochs=2, steps_per_epoch=5, verbose=0)
    evaluated = [model.evaluate(fmnist_train_ds, verbose=0), model.evaluate(fmnist_train_ds.repeat(), steps=10,
                                                                             verbose=0)]
    predict_ds = tf.data.Dataset.from_tensor_slices(images).batch(32)
    shapes = [list(model.predict(predict_ds, steps=10, verbose=0).shape),
              list(model.predict(fmnist_train_ds, steps=10, verbose=0).shape),
              list(model.predict(predict_ds, verbose=0).shape)]
    return [sorted(h1.history), len(h1.history["loss"]), len(h2.history["loss"]),
            [len(e) for e in evaluated], shapes]


def case_shuffle_reshuffle(tf):
    ds = tf.data.Dataset.range(10).shuffle(10, seed=1, reshuffle_each_iteration=False)
    a, b = _list(ds), _list(ds)
    ds2 = tf.data.Dataset.range(10).shuffle(4, seed=3)
    return {"same_each_iteration": a == b, "permutation": sorted(a) == list(range(10)),
            "card": card(ds), "reshuffled_is_permutation": sorted(_list(ds2)) == list(range(10)),
            "spec": spec(ds.element_spec), "bad_buffer": raises(lambda: list(tf.data.Dataset.range(3).shuffle(0)))}


# ----------------------------------------------------------------------------------------- time series

def case_time_series(tf):
    range_ds = tf.data.Dataset.range(100000)
    batches = range_ds.batch(10, drop_remainder=True)

    def dense_1_step(batch):
        return batch[:-1], batch[1:]
    predict_dense_1_step = batches.map(dense_1_step)
    batches15 = range_ds.batch(15, drop_remainder=True)

    def label_next_5_steps(batch):
        return (batch[:-5], batch[-5:])
    predict_5_steps = batches15.map(label_next_5_steps)
    feature_length, label_length = 10, 3
    features = range_ds.batch(feature_length, drop_remainder=True)
    labels = range_ds.batch(feature_length).skip(1).map(lambda labels: labels[:label_length])
    predicted_steps = tf.data.Dataset.zip((features, labels))
    return {"batches": _list(batches, 2), "dense": _list(predict_dense_1_step, 2),
            "dense_spec": spec(predict_dense_1_step.element_spec), "five": _list(predict_5_steps, 2),
            "five_spec": spec(predict_5_steps.element_spec), "steps": _list(predicted_steps, 2),
            "steps_spec": spec(predicted_steps.element_spec), "steps_card": card(predicted_steps),
            "labels_card": card(labels)}


def case_window_flat_map(tf):
    range_ds = tf.data.Dataset.range(100000)
    window_size = 5
    windows = range_ds.window(window_size, shift=1)
    subs = [isinstance(sub_ds, tf.data.Dataset) for sub_ds in windows.take(5)]
    flat = _list(windows.flat_map(lambda x: x).take(30))

    def sub_to_batch(sub):
        return sub.batch(window_size, drop_remainder=True)
    batched = _list(windows.flat_map(sub_to_batch).take(5))

    def make_window_dataset(ds, window_size=5, shift=1, stride=1):
        windows = ds.window(window_size, shift=shift, stride=stride)

        def sub_to_batch(sub):
            return sub.batch(window_size, drop_remainder=True)
        return windows.flat_map(sub_to_batch)
    ds = make_window_dataset(range_ds, window_size=10, shift=5, stride=3)
    small = tf.data.Dataset.range(7).window(3, shift=2)
    tuples = tf.data.Dataset.from_tensor_slices(([1, 2, 3], [4, 5, 6])).window(2)
    tuple_windows = [[_list(a), _list(b)] for a, b in tuples]
    return {"subs_are_datasets": subs, "flat": flat, "batched": batched, "strided": _list(ds, 3),
            "strided_spec": spec(ds.element_spec), "window_spec": dataset_spec(windows.element_spec),
            "small": [_list(w) for w in small], "small_card": card(small),
            "small_drop": [_list(w) for w in tf.data.Dataset.range(7).window(3, shift=2, drop_remainder=True)],
            "tuple_windows": tuple_windows, "tuple_spec": [dataset_spec(s) for s in tuples.element_spec]}


# ----------------------------------------------------------------------------------------- API examples

def case_interleave(tf):
    dataset = tf.data.Dataset.range(1, 6)
    blocks = dataset.interleave(lambda x: tf.data.Dataset.from_tensors(x).repeat(6), cycle_length=2, block_length=4)
    default = tf.data.Dataset.range(1, 3).interleave(lambda x: tf.data.Dataset.range(10 * x, 10 * x + 2))
    parallel = dataset.interleave(lambda x: tf.data.Dataset.from_tensors(x).repeat(2), cycle_length=3,
                                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    uneven = tf.data.Dataset.range(1, 4).interleave(lambda x: tf.data.Dataset.range(x), cycle_length=2)
    return {"blocks": _list(blocks), "default": _list(default), "parallel": _list(parallel),
            "uneven": _list(uneven), "spec": spec(blocks.element_spec), "card": card(blocks)}


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
    return {"zip": _list(z), "zip3": _list(z3), "zip_short": _list(zd), "zip_positional": _list(zpos),
            "zip_dict": _list(zdict), "zip_dict_spec": spec(zdict.element_spec), "zip_card": card(zd),
            "concat": _list(cat), "concat_card": card(cat), "concat_spec": spec(cat.element_spec),
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
    return {"take": _list(ds.take(3)), "take_all": len(_list(ds.take(-1))), "skip": _list(ds.skip(7)),
            "skip_all": _list(ds.skip(-1)), "take_more": card(ds.take(20)), "skip_more": card(ds.skip(20)),
            "take_while": _list(tw), "take_while_card": card(tw), "filter": _list(f), "filter_card": card(f),
            "filter_equal": _list(f2), "enumerate": _list(e), "enumerate_spec": spec(e.element_spec),
            "enumerate_pairs": _list(e2), "enumerate_pairs_spec": spec(e2.element_spec),
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
    return {"count": typed(count_), "total": typed(total), "pair": typed(pair), "scan": _list(scanned),
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
    return {"unbatch": _list(u), "unbatch_spec": spec(u.element_spec), "gen_spec": spec(ds.element_spec),
            "fixed_spec": spec(fixed.element_spec), "fixed_card": card(fixed), "rebatch3": _list(r3),
            "rebatch3_spec": spec(r3.element_spec), "rebatch5": _list(r5), "rebatch_list": _list(rl),
            "rebatch_drop": _list(rd), "rebatch_drop_spec": spec(rd.element_spec),
            "unbatch_scalar": raises(lambda: tf.data.Dataset.range(3).unbatch())}


def case_group_by_window(tf):
    dataset = tf.data.Dataset.range(10)
    window_size = 5
    grouped = dataset.group_by_window(key_func=lambda x: x % 2, reduce_func=lambda key, ds: ds.batch(window_size),
                                      window_size=window_size)
    small = tf.data.Dataset.range(10).group_by_window(lambda x: x % 3, lambda key, ds: ds.batch(10), window_size=2)
    return {"grouped": _list(grouped), "spec": spec(grouped.element_spec), "small": _list(small),
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
    return {"default": _list(b1), "spec": spec(b1.element_spec), "to_boundary": _list(b2),
            "to_boundary_spec": spec(b2.element_spec), "drop": _list(b3), "drop_spec": spec(b3.element_spec),
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
    first, second = _list(ds), _list(ds)
    mapped = tf.data.Dataset.range(5).map(lambda x: x * x).cache()
    return {"first": first, "second": second, "generator_calls": len(calls), "spec": spec(ds.element_spec),
            "mapped": [_list(mapped), _list(mapped)], "mapped_card": card(mapped)}


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
            "for_after_partial": _list(it2), "fresh_iter": _list(ds)}


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
    return {"added": _list(added), "added_spec": spec(added.element_spec), "swapped": _list(swapped),
            "picked": _list(picked), "to_dict": _list(to_dict), "to_dict_spec": spec(to_dict.element_spec),
            "nested": _list(nest), "as_list": _list(as_list), "as_list_spec": spec(as_list.element_spec),
            "const": [typed(e) for e in const], "parallel": _list(parallel),
            "wrong_arity": raises(lambda: list(pairs.map(lambda x: x))),
            "float_ops": _list(tf.data.Dataset.from_tensor_slices([1.0, 2.0]).map(lambda x: x / 2))}


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
            "bad_attr": raises(bad_attr), "values": _list(ds)}


# ----------------------------------------------------------------------------------------- distributed input

def _local_nested(strategy, x):
    if isinstance(x, (tuple, list)):
        return [_local_nested(strategy, v) for v in x]
    return local(strategy, x)


def case_distributed_tutorial(tf):
    global_batch_size = 16
    mirrored_strategy = two_cpus(tf)
    dataset = tf.data.Dataset.from_tensors(([1.], [1.])).repeat(100).batch(global_batch_size)

    def train_step(inputs):
        features, labels = inputs
        return labels - 0.3 * features
    dist_dataset = mirrored_strategy.experimental_distribute_dataset(dataset)
    shapes, results = [], []
    for dist_inputs in dist_dataset:
        shapes.append([list(v.shape) for v in mirrored_strategy.experimental_local_results(dist_inputs[0])])
        results.append(local(mirrored_strategy, mirrored_strategy.run(train_step, args=(dist_inputs,))))
    return {"num_replicas": mirrored_strategy.num_replicas_in_sync, "shapes": shapes, "last": results[-1],
            "first_row": results[0][0][0], "second_pass": sum(1 for _ in dist_dataset)}


def case_distributed_uneven(tf):
    strategy = two_cpus(tf)
    out = {}
    for n, batch in ((7, 4), (5, 4), (9, 2), (6, 4), (3, 4)):
        dist = strategy.experimental_distribute_dataset(tf.data.Dataset.range(n).batch(batch))
        out[f"range{n}_batch{batch}"] = [local(strategy, x) for x in dist]
    dropped = strategy.experimental_distribute_dataset(tf.data.Dataset.range(7).batch(4, drop_remainder=True))
    out["dropped"] = [local(strategy, x) for x in dropped]
    pairs = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((np.arange(5.0), np.arange(5))).batch(4))
    out["pairs"] = [_local_nested(strategy, x) for x in pairs]
    out["spec"] = [type(dropped.element_spec).__name__, [type(s).__name__ for s in pairs.element_spec]]
    return out


def case_distributed_unbatched_dataset(tf):
    return raises(lambda: list(two_cpus(tf).experimental_distribute_dataset(tf.data.Dataset.range(3))))


def case_distributed_iterators(tf):
    strategy = two_cpus(tf)
    dataset = tf.data.Dataset.range(9).batch(2)
    dist_dataset = strategy.experimental_distribute_dataset(dataset)
    seen = []
    with strategy.scope():
        dist_dataset_iterator = iter(dist_dataset)
        while True:
            optional_data = dist_dataset_iterator.get_next_as_optional()
            if not optional_data.has_value():
                break
            per_replica_results = strategy.run(lambda inputs: inputs, args=(optional_data.get_value(),))
            seen.append(local(strategy, per_replica_results))
    it = iter(strategy.experimental_distribute_dataset(tf.data.Dataset.range(4).batch(4)))
    first = local(strategy, next(it))
    return {"seen": seen, "first": first, "next_at_end": raises(lambda: next(it)),
            "get_next_at_end": raises(it.get_next)}


def case_distributed_from_function(tf):
    global_batch_size = 16
    mirrored_strategy = two_cpus(tf)
    contexts = []

    def dataset_fn(input_context):
        batch_size = input_context.get_per_replica_batch_size(global_batch_size)
        contexts.append([input_context.num_input_pipelines, input_context.input_pipeline_id,
                         input_context.num_replicas_in_sync, batch_size])
        dataset = tf.data.Dataset.range(40)
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        dataset = dataset.batch(batch_size)
        dataset = dataset.prefetch(2)
        return dataset
    dist_dataset = mirrored_strategy.distribute_datasets_from_function(dataset_fn)
    steps = [local(mirrored_strategy, x) for x in dist_dataset]

    def bad_fn(input_context):
        return tf.data.Dataset.range(4).batch(input_context.get_per_replica_batch_size(15))
    return {"contexts": contexts, "steps": steps,
            "indivisible": raises(lambda: list(mirrored_strategy.distribute_datasets_from_function(bad_fn)))}


def case_distributed_options(tf):
    strategy = two_cpus(tf)
    out = {}
    for policy in ("OFF", "AUTO", "DATA"):
        dataset = tf.data.Dataset.from_tensors(([1.], [1.])).repeat(64).batch(16)
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = getattr(tf.data.experimental.AutoShardPolicy, policy)
        dataset = dataset.with_options(options)
        dist = strategy.experimental_distribute_dataset(dataset)
        out[policy] = [[list(v.shape) for v in strategy.experimental_local_results(x[0])] for x in dist]
    return out

