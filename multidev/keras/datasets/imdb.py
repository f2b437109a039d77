"""IMDB movie-review sentiment (25,000 + 25,000 reviews) from a local ``imdb.npz``, with Keras's processing.

No network access: put Keras's file at ``$KERAS_HOME/datasets/imdb.npz`` (default
``~/.keras/datasets/imdb.npz``) or pass ``path=``. Keras's file stores the reviews as pickled object
arrays, read only with ``allow_pickle=True`` (numpy arrays only); ``save_safe_npz`` writes the
pickle-free layout (``x_train_flat``/``x_train_offsets``, ``y_train``, and the same for test).

Example:
    (x_train, y_train), (x_test, y_test) = md.keras.datasets.imdb.load_data(num_words=10000, allow_pickle=True)
"""

from __future__ import annotations

import json

import numpy as np

from multidev.keras.datasets import _cache, _sequences

_ORIGIN = _cache.KERAS_ORIGIN + "imdb.npz"
_HINT = "then imdb.save_safe_npz((x_train, y_train), (x_test, y_test), path) writes the pickle-free layout."


def save_safe_npz(train, test, path):
    """Write ``(x_train, y_train), (x_test, y_test)`` (lists of id lists) in the pickle-free layout."""
    (x_train, y_train), (x_test, y_test) = train, test
    np.savez(path, **_sequences.flatten("x_train", x_train), **_sequences.flatten("x_test", x_test),
             y_train=np.asarray(y_train, dtype=np.int64), y_test=np.asarray(y_test, dtype=np.int64))


def load_data(path="imdb.npz", num_words=None, skip_top=0, maxlen=None, seed=113, start_char=1, oov_char=2,
              index_from=3, allow_pickle=False):
    """Keras's imdb.load_data: shuffle train and test (seed), shift ids, drop long reviews, limit the vocabulary.

    Returns ``(x_train, y_train), (x_test, y_test)``; x are object arrays of word-id lists.

    Example:
        >>> (x_train, y_train), _ = md.keras.datasets.imdb.load_data(num_words=10000, allow_pickle=True)
    """
    data = _sequences.read(_cache.resolve_file(path, "imdb.npz", "imdb.npz", _ORIGIN), ["x_train", "x_test"],
                           ["y_train", "y_test"], allow_pickle, _HINT)
    rng = np.random.RandomState(seed)
    parts = []
    for split in ("train", "test"):
        xs, labels = data[f"x_{split}"], data[f"y_{split}"]
        order = np.arange(len(xs))
        rng.shuffle(order)
        xs, labels = _sequences.shift([xs[i] for i in order], start_char, index_from), labels[order]
        if maxlen:
            xs, labels = _sequences.drop_long(maxlen, xs, labels)
        parts.append((xs, labels))
    (x_train, y_train), (x_test, y_test) = parts
    if maxlen and (not x_train or not x_test):
        raise _sequences.no_sequence_left(maxlen)
    xs = _sequences.limit_vocab(x_train + x_test, num_words, skip_top, oov_char)
    cut = len(x_train)
    return ((_sequences.as_object_array(xs[:cut]), y_train), (_sequences.as_object_array(xs[cut:]), y_test))


def get_word_index(path="imdb_word_index.json"):
    """The word -> index dict (``imdb_word_index.json``; ids before the ``index_from`` shift)."""
    with open(_cache.resolve_file(path, "imdb_word_index.json", "imdb_word_index.json",
                                  _cache.KERAS_ORIGIN + "imdb_word_index.json")) as f:
        return json.load(f)
