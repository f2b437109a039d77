"""Keras's processing of word-id sequence data sets (IMDB, Reuters), and their pickle-free layout.

Keras ships ragged sequences as object arrays (pickles). The pickle-free layout stores each ragged
array ``k`` as ``k_flat`` (all ids concatenated) and ``k_offsets`` (n + 1 start offsets).
"""

from __future__ import annotations

import numpy as np

from multidev.keras.datasets import _safe_pickle


def as_object_array(seqs: list[list[int]]) -> np.ndarray:
    """A 1-D object array of lists, even when every list has the same length."""
    out = np.empty(len(seqs), dtype=object)
    for i, s in enumerate(seqs):
        out[i] = s
    return out


def flatten(key: str, seqs) -> dict[str, np.ndarray]:
    lengths = np.array([len(s) for s in seqs], dtype=np.int64)
    return {f"{key}_flat": np.array([w for s in seqs for w in s], dtype=np.int32),
            f"{key}_offsets": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)}


def read(path: str, ragged: list[str], dense: list[str], allow_pickle: bool, convert_hint: str) -> dict:
    """``{key: list of int lists}`` for ``ragged`` keys and arrays for ``dense`` ones, from either layout."""
    with np.load(path, allow_pickle=False) as f:
        keys = set(f.files)
        if all({f"{k}_flat", f"{k}_offsets"} <= keys for k in ragged) and set(dense) <= keys:
            out = {k: np.asarray(f[k]) for k in dense}
            for k in ragged:
                flat, offsets = f[f"{k}_flat"], f[f"{k}_offsets"]
                out[k] = [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]
            return out
        expected = sorted({*ragged, *dense})
        if not set(expected) <= keys:
            raise ValueError(f"{path!r} has arrays {sorted(keys)}; expected {expected} (Keras's layout) or "
                             f"{sorted(f'{k}_{p}' for k in ragged for p in ('flat', 'offsets'))} + {dense} "
                             "(multidev's pickle-free layout).")
    if not allow_pickle:
        raise _safe_pickle.consent_error(
            path, "its sequences as pickled object arrays (" + ", ".join(repr(k) for k in ragged) + ")", convert_hint)
    arrays = _safe_pickle.load_npz(path)
    out = {k: np.asarray(arrays[k]) for k in dense}
    for k in ragged:
        out[k] = [list(map(int, x)) for x in arrays[k]]
    return out


def shift(xs, start_char, index_from):
    """Prepend ``start_char`` and add ``index_from`` to every id (Keras reserves 0, 1, 2)."""
    if start_char is not None:
        return [[start_char] + [w + index_from for w in x] for x in xs]
    return [[w + index_from for w in x] for x in xs]


def drop_long(maxlen, xs, labels):
    """Keep the sequences shorter than ``maxlen`` (Keras's ``remove_long_seq``)."""
    keep = [i for i, x in enumerate(xs) if len(x) < maxlen]
    return [xs[i] for i in keep], labels[keep]


def limit_vocab(xs, num_words, skip_top, oov_char):
    """Ids outside ``[skip_top, num_words)`` become ``oov_char`` (or are dropped when it is None)."""
    if not num_words:
        num_words = max((max(x) for x in xs if x), default=0)
    if oov_char is not None:
        return [[w if skip_top <= w < num_words else oov_char for w in x] for x in xs]
    return [[w for w in x if skip_top <= w < num_words] for x in xs]


def no_sequence_left(maxlen):
    return ValueError(f"After filtering for sequences shorter than maxlen={maxlen}, no sequence was kept. "
                      "Increase maxlen.")
