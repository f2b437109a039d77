"""TensorFlow's guide "tf.data: Build TensorFlow input pipelines", typed as printed with ``tf.`` -> ``md.``:
downloads become small synthetic arrays (the Titanic CSV 628 lines of text, Fashion-MNIST 400 images),
random data fixed numpy arrays; tf.random and tf.strings, which multidev leaves to torch, are not used.
A case observes elements, dtypes, element_spec, cardinalities and error types together; a deliberate
difference is a case of its own (KNOWN in test_conformance.py). The Dataset API examples are in
data_api.py, the "Distributed input" tutorial in input_tutorial.py."""

import numpy as np

from conformance_support import InTempDirectory, card, dataset_spec, elements, raises, spec, texts, typed, val


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
    return {"batches": elements(batches), "spec": spec(ds_counter.element_spec), "card": card(ds_counter),
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
    return {"batches": elements(batched_dataset, 4), "spec": spec(batched_dataset.element_spec),
            "dropped_spec": spec(dropped.element_spec), "dropped_card": card(dropped),
            "card": card(batched_dataset), "last": elements(batched_dataset.skip(24)),
            "dropped_last": elements(dropped.skip(13))}


def case_padded_batch(tf):
    dataset = tf.data.Dataset.range(100)
    dataset = dataset.map(lambda x: tf.fill([tf.cast(x, tf.int32)], x))
    padded = dataset.padded_batch(4, padded_shapes=(None,))
    fixed = dataset.take(3).padded_batch(2, padded_shapes=(5,), padding_values=tf.constant(-1, tf.int64))
    implicit = dataset.take(3).padded_batch(2, padding_values=tf.constant(7, tf.int64), drop_remainder=True)
    pairs = tf.data.Dataset.from_tensor_slices([1, 2, 3]).map(lambda x: (tf.fill([x], x), tf.fill([2], x)))
    pair_batch = pairs.padded_batch(3, padded_shapes=([4], [None]), padding_values=(0, -1))
    dicts = tf.data.Dataset.from_tensor_slices([1, 2]).map(lambda x: {"v": tf.fill([x], 1.0)})
    return {"batches": elements(padded, 2), "spec": spec(padded.element_spec),
            "fixed": elements(fixed), "fixed_spec": spec(fixed.element_spec), "implicit": elements(implicit),
            "pairs": elements(pair_batch),
            "pairs_spec": spec(pair_batch.element_spec), "dicts": elements(dicts.padded_batch(2))}


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


def case_text_lines(tf):
    """The guide's "Consuming text data" (the Iliad translations -> three small files), printing lines
    with ``line.numpy()``, and a batch of lines with ``.numpy()``."""
    import os
    with InTempDirectory():
        file_paths = []
        for name in ("cowper.txt", "derby.txt", "butler.txt"):
            with open(name, "w") as f:
                f.write("".join(f"{name[:-4]} {i}\n" for i in range(4)))
            file_paths.append(os.path.abspath(name))
        dataset = tf.data.TextLineDataset(file_paths)
        first = [line.numpy().decode() for line in dataset.take(5)]
        files_ds = tf.data.Dataset.from_tensor_slices(file_paths)
        lines_ds = files_ds.interleave(tf.data.TextLineDataset, cycle_length=3)
        interleaved = [line.numpy().decode() for line in lines_ds.take(9)]
        batch = next(iter(dataset.batch(2))).numpy()
        return [first, interleaved, [b.decode() for b in batch], type(batch[0]).__name__, list(batch.shape),
                spec(dataset.element_spec), spec(lines_ds.batch(2).element_spec), card(dataset)]


def case_experimental_counter(tf):
    """The guide's Titanic section writes tf.data.experimental.Counter() (deprecated, still in 2.21)."""
    counter = tf.data.experimental.Counter()
    return [elements(counter.take(3)), spec(counter.element_spec), card(counter),
            elements(tf.data.experimental.Counter(start=2, step=-1, dtype=tf.int32).take(3))]


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
    a, b = elements(ds), elements(ds)
    ds2 = tf.data.Dataset.range(10).shuffle(4, seed=3)
    return {"same_each_iteration": a == b, "permutation": sorted(a) == list(range(10)),
            "card": card(ds), "reshuffled_is_permutation": sorted(elements(ds2)) == list(range(10)),
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
    return {"batches": elements(batches, 2), "dense": elements(predict_dense_1_step, 2),
            "dense_spec": spec(predict_dense_1_step.element_spec), "five": elements(predict_5_steps, 2),
            "five_spec": spec(predict_5_steps.element_spec), "steps": elements(predicted_steps, 2),
            "steps_spec": spec(predicted_steps.element_spec), "steps_card": card(predicted_steps),
            "labels_card": card(labels)}


def case_window_flat_map(tf):
    range_ds = tf.data.Dataset.range(100000)
    window_size = 5
    windows = range_ds.window(window_size, shift=1)
    subs = [isinstance(sub_ds, tf.data.Dataset) for sub_ds in windows.take(5)]
    flat = elements(windows.flat_map(lambda x: x).take(30))

    def sub_to_batch(sub):
        return sub.batch(window_size, drop_remainder=True)
    batched = elements(windows.flat_map(sub_to_batch).take(5))

    def make_window_dataset(ds, window_size=5, shift=1, stride=1):
        windows = ds.window(window_size, shift=shift, stride=stride)

        def sub_to_batch(sub):
            return sub.batch(window_size, drop_remainder=True)
        return windows.flat_map(sub_to_batch)
    ds = make_window_dataset(range_ds, window_size=10, shift=5, stride=3)
    small = tf.data.Dataset.range(7).window(3, shift=2)
    tuples = tf.data.Dataset.from_tensor_slices(([1, 2, 3], [4, 5, 6])).window(2)
    tuple_windows = [[elements(a), elements(b)] for a, b in tuples]
    return {"subs_are_datasets": subs, "flat": flat, "batched": batched, "strided": elements(ds, 3),
            "strided_spec": spec(ds.element_spec), "window_spec": dataset_spec(windows.element_spec),
            "small": [elements(w) for w in small], "small_card": card(small),
            "small_drop": [elements(w) for w in tf.data.Dataset.range(7).window(3, shift=2, drop_remainder=True)],
            "tuple_windows": tuple_windows, "tuple_spec": [dataset_spec(s) for s in tuples.element_spec]}
