"""tf.keras's skip-gram helpers (``tf.keras.preprocessing.sequence.skipgrams`` and ``make_sampling_table``), the
data side of TensorFlow's word2vec tutorial: pairs of word indices with 0/1 labels, drawn from Python's ``random``
module in tf.keras's order (so ``random.seed(s)`` before a call gives tf.keras's pairs).

Example:
    >>> random.seed(7)
    >>> couples, labels = skipgrams([1, 2, 3], vocabulary_size=4, window_size=1, negative_samples=0)
    >>> sorted(couples), labels
    ([[1, 2], [2, 1], [2, 3], [3, 2]], [1, 1, 1, 1])
"""

from __future__ import annotations

import random

import numpy as np

_EULER_GAMMA = 0.577   # tf.keras's rounding of the Euler-Mascheroni constant: its tables use it


def make_sampling_table(size, sampling_factor=1e-5):
    """The probability of keeping a word of each rank (Zipf frequencies; word2vec's subsampling formula
    ``min(1, sqrt(f / sampling_factor) / (f / sampling_factor))``); rank 0 counts as rank 1."""
    rank = np.arange(size)
    rank[0] = 1
    inv_frequency = rank * (np.log(rank) + _EULER_GAMMA) + 0.5 - 1.0 / (12.0 * rank)
    scaled = sampling_factor * inv_frequency
    return np.minimum(1.0, scaled / np.sqrt(scaled))


def _positive_pairs(sequence, window_size, categorical, sampling_table):
    """(word, neighbour) pairs within ``window_size`` on each side; index 0 is padding, never paired."""
    couples, labels = [], []
    for i, word in enumerate(sequence):
        if not word or (sampling_table is not None and sampling_table[word] < random.random()):
            continue
        for j in range(max(0, i - window_size), min(len(sequence), i + window_size + 1)):
            if j != i and sequence[j]:
                couples.append([word, sequence[j]])
                labels.append([0, 1] if categorical else 1)
    return couples, labels


def skipgrams(sequence, vocabulary_size, window_size=4, negative_samples=1.0, shuffle=True, categorical=False,
              sampling_table=None, seed=None):
    """``(couples, labels)``: every (word, neighbour) pair labelled 1, then ``negative_samples`` times as many
    (word, random word in ``[1, vocabulary_size)``) pairs labelled 0, shuffled alike (``seed``, else one drawn
    from ``random``). ``categorical`` labels are ``[0, 1]``/``[1, 0]``. A negative ``window_size`` or
    ``negative_samples`` gives no pairs of that kind, as in tf.keras.
    """
    couples, labels = _positive_pairs(list(sequence), int(window_size), categorical, sampling_table)
    if negative_samples > 0:
        count = int(len(labels) * negative_samples)
        words = [c[0] for c in couples]
        random.shuffle(words)
        couples += [[words[i % len(words)], random.randint(1, vocabulary_size - 1)] for i in range(count)]
        labels += [[1, 0] if categorical else 0] * count
    if shuffle:
        if seed is None:
            seed = random.randint(0, 10e6)
        random.seed(seed)
        random.shuffle(couples)
        random.seed(seed)
        random.shuffle(labels)
    return couples, labels
