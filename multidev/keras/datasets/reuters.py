"""Reuters newswire topics (46 classes) from a local ``reuters.npz``, with Keras's processing.

No network access: put the file where Keras caches it (``$KERAS_HOME/datasets/reuters.npz``, by
default ``~/.keras/datasets/reuters.npz``) or pass ``path=``. Two layouts are read:
  * safe layout (preferred): int arrays ``x_flat`` (all word ids concatenated), ``x_offsets``
    (n + 1 start offsets) and ``y`` — no pickle involved;
  * Keras's original layout: ``x`` an object array of lists, ``y``. Object arrays can only be read
    by unpickling, so it needs ``allow_pickle=True`` explicitly (multidev then builds nothing but
    numpy arrays from the file); ``save_safe_npz`` converts it once to the safe layout.

Example:
    (x_train, y_train), (x_test, y_test) = md.keras.datasets.reuters.load_data(num_words=10000)
"""

from __future__ import annotations

import json

import numpy as np

from multidev.keras.datasets import _cache, _sequences

_ORIGIN = _cache.KERAS_ORIGIN + "reuters.npz"
_HINT = "then reuters.save_safe_npz(xs, ys, path) writes the pickle-free layout."


def read_sequences(path, allow_pickle=False):
    """``(list of int lists, labels)`` from a reuters-style npz (safe or Keras layout)."""
    out = _sequences.read(path, ["x"], ["y"], allow_pickle, _HINT)
    return out["x"], out["y"]


def save_safe_npz(sequences, labels, path):
    """Write sequences + labels in the pickle-free layout (``x_flat``, ``x_offsets``, ``y``)."""
    np.savez(path, **_sequences.flatten("x", sequences), y=np.asarray(labels, dtype=np.int64))


def load_data(path="reuters.npz", num_words=None, skip_top=0, maxlen=None, test_split=0.2, seed=113, start_char=1,
              oov_char=2, index_from=3, allow_pickle=False):
    """Keras's reuters.load_data: shuffle (seed), shift ids by ``index_from``, filter, split.

    Returns ``(x_train, y_train), (x_test, y_test)``; x are object arrays of word-id lists.
    """
    xs, labels = read_sequences(_cache.resolve_file(path, "reuters.npz", "reuters.npz", _ORIGIN), allow_pickle)
    rng = np.random.RandomState(seed)
    order = np.arange(len(xs))
    rng.shuffle(order)
    xs, labels = _sequences.shift([xs[i] for i in order], start_char, index_from), labels[order]
    if maxlen:
        xs, labels = _sequences.drop_long(maxlen, xs, labels)
        if not xs:
            raise _sequences.no_sequence_left(maxlen)
    xs = _sequences.limit_vocab(xs, num_words, skip_top, oov_char)
    cut = int(len(xs) * (1 - test_split))
    return ((_sequences.as_object_array(xs[:cut]), labels[:cut]),
            (_sequences.as_object_array(xs[cut:]), labels[cut:]))


def get_word_index(path="reuters_word_index.json"):
    """The word -> index dict (JSON file ``reuters_word_index.json``; ids before the ``index_from`` shift)."""
    with open(_cache.resolve_file(path, "reuters_word_index.json", "reuters_word_index.json",
                                  _cache.KERAS_ORIGIN + "reuters_word_index.json")) as f:
        return json.load(f)
