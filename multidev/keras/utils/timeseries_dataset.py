"""``md.keras.utils.timeseries_dataset_from_array``: sliding windows over an array as an ``md.data.Dataset``.

Keras 3's rules (``keras.src.utils.timeseries_dataset_utils``, whose dataset needs TensorFlow or Grain): window
``k`` starts at ``start_index + positions[k]`` and takes ``sequence_length`` steps ``sampling_rate`` apart;
``positions = arange(0, num_seqs, sequence_stride)`` with ``num_seqs = end_index - start_index -
(sequence_length - 1) * sampling_rate`` (at most ``len(targets)``), shuffled once with
``np.random.RandomState(seed)`` (then locally at each iteration, by a shuffle buffer of 8 batches, whose order
is multidev's RNG's, not TensorFlow's); window ``k``'s target is ``targets[start_index + positions[k]]``. Windows are
gathered batch by batch (a map over batches of start positions), never all materialized at once.

Example (keras.io's weather forecasting: 720 hourly steps sampled every 6 hours, the target 72 steps later):
    dataset_train = md.keras.utils.timeseries_dataset_from_array(
        x_train, y_train, sequence_length=120, sampling_rate=6, batch_size=256)
"""

from __future__ import annotations

import numpy as np
import torch

from multidev import data as md_data


def _check(data, sequence_stride, sampling_rate, start_index, end_index):
    """Keras 3's argument checks, in its order and words."""
    n = len(data)
    if start_index:
        if start_index < 0:
            raise ValueError(f"`start_index` must be 0 or greater. Received: start_index={start_index}")
        if start_index >= n:
            raise ValueError(f"`start_index` must be lower than the length of the data. Received: "
                             f"start_index={start_index}, for data of length {n}")
    if end_index:
        if start_index and end_index <= start_index:
            raise ValueError(f"`end_index` must be higher than `start_index`. Received: start_index={start_index}, "
                             f"and end_index={end_index} ")
        if end_index >= n:
            raise ValueError(f"`end_index` must be lower than the length of the data. Received: end_index={end_index},"
                             f" for data of length {n}")
    for name, value in (("sampling_rate", sampling_rate), ("sequence_stride", sequence_stride)):
        if value <= 0:
            raise ValueError(f"`{name}` must be higher than 0. Received: {name}={value}")
        if value >= n:
            raise ValueError(f"`{name}` must be lower than the length of the data. Received: {name}={value}, "
                             f"for data of length {n}")


def _start_positions(n_data, n_targets, sequence_length, sequence_stride, sampling_rate, shuffle, seed,
                     start_index, end_index):
    num_seqs = end_index - start_index - (sequence_length - 1) * sampling_rate
    if n_targets is not None:
        num_seqs = min(num_seqs, n_targets)
    positions = np.arange(0, max(num_seqs, 0), sequence_stride, dtype="int64")
    if shuffle:
        if seed is None:
            seed = np.random.randint(1e6)
        np.random.RandomState(seed).shuffle(positions)
    return positions


def timeseries_dataset_from_array(data, targets, sequence_length, sequence_stride=1, sampling_rate=1,
                                  batch_size=128, shuffle=False, seed=None, start_index=None, end_index=None):
    """Windows of ``data`` (and their ``targets``) as Keras 3 makes them; batches of ``batch_size`` (None:
    single windows). Returns an ``md.data.Dataset`` of ``inputs`` or ``(inputs, targets)``."""
    _check(data, sequence_stride, sampling_rate, start_index, end_index)
    start_index = start_index or 0
    end_index = len(data) if end_index is None else end_index
    values = torch.as_tensor(np.asarray(data))
    labels = None if targets is None else torch.as_tensor(np.asarray(targets))
    positions = _start_positions(len(data), None if targets is None else len(targets), sequence_length,
                                 sequence_stride, sampling_rate, shuffle, seed, start_index, end_index)
    steps = torch.arange(sequence_length, dtype=torch.int64) * sampling_rate

    def windows(starts):
        starts = starts + start_index
        inputs = values[starts.unsqueeze(-1) + steps]
        return inputs if labels is None else (inputs, labels[starts])

    dataset = md_data.Dataset.from_tensor_slices(positions)
    if shuffle:   # and again at each iteration, as Keras's tf.data pipeline (its numbers are TensorFlow's RNG's)
        dataset = dataset.shuffle(buffer_size=1024 if batch_size is None else batch_size * 8, seed=seed)
    if batch_size is not None:
        dataset = dataset.batch(batch_size)
    return dataset.map(windows)
