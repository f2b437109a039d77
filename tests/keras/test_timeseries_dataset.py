"""``md.keras.utils.timeseries_dataset_from_array`` as Keras 3 makes the windows (keras.io's weather forecasting;
Keras 3's own needs TensorFlow or Grain). Expected values: Keras's docstring examples and TF 2.21's output."""

from __future__ import annotations

import numpy as np
import pytest

import multidev as md

ts = md.keras.utils.timeseries_dataset_from_array


def test_keras_docstring_temporal_regression():
    data = np.arange(100)
    inputs, targets = next(iter(ts(data[:-10], data[10:], sequence_length=10)))
    np.testing.assert_array_equal(inputs[0].numpy(), data[:10])
    assert int(targets[0]) == 10 and tuple(inputs.shape) == (81, 10)   # 90 - 9 windows: one batch of 128


def test_keras_docstring_many_to_many_without_targets():
    x, y = np.arange(100), np.arange(100) * 2
    inputs = ts(x, None, sequence_length=20, sequence_stride=20)
    outputs = ts(y, None, sequence_length=20, sequence_stride=20)
    for a, b in zip(inputs, outputs):
        np.testing.assert_array_equal(a[0].numpy(), x[:20])
        np.testing.assert_array_equal(b[1].numpy(), y[20:40])


def test_sampling_rate_stride_start_end_and_batches_as_tensorflow():
    data = np.arange(40, dtype="float32").reshape(20, 2)   # row r is [2r, 2r + 1]
    batches = list(ts(data, np.arange(20) * 3, sequence_length=4, sampling_rate=2, sequence_stride=3,
                      batch_size=2, start_index=2, end_index=18))
    assert [b[1].tolist() for b in batches] == [[6, 15], [24, 33]]   # TF 2.21: targets[start_index + position]
    rows = np.array([2, 5, 8, 11])[:, None] + 2 * np.arange(4)       # windows of 4 steps 2 rows apart
    np.testing.assert_array_equal(np.concatenate([b[0].numpy() for b in batches])[:, :, 0], 2 * rows)


def test_shuffle_keeps_every_window_once_and_a_seed_repeats_the_order():
    def windows(seed):
        return [tuple(w.tolist()) for w in ts(np.arange(30), None, sequence_length=5, batch_size=None,
                                              shuffle=True, seed=seed)]
    first = windows(7)
    assert sorted(first) == [tuple(range(s, s + 5)) for s in range(26)] and first != sorted(first)
    assert windows(7) == first


@pytest.mark.parametrize("kwargs,match", [
    ({"sampling_rate": 0}, "`sampling_rate` must be higher than 0. Received: sampling_rate=0"),
    ({"sequence_stride": 10}, "`sequence_stride` must be lower than the length of the data"),
    ({"start_index": 5, "end_index": 5}, "`end_index` must be higher than `start_index`"),
    ({"start_index": -1}, "`start_index` must be 0 or greater"),
])
def test_bad_arguments_raise_keras_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ts(np.arange(10), None, sequence_length=3, **kwargs)
