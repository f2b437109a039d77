"""``pad_sequences`` with Keras's exact padding and truncating rules (and tf.keras's ``skipgrams``, ``skipgrams.py``).

Example:
    pad_sequences([[1, 2, 3], [4]], maxlen=2)          # [[2, 3], [0, 4]]  (pre-truncate, pre-pad)
"""

from __future__ import annotations

import numpy as np

from multidev.keras._missing import missing_names
from multidev.keras.preprocessing.skipgrams import make_sampling_table, skipgrams  # noqa: F401 (tf.keras's names)

_SIDES = ("pre", "post")


def pad_sequences(sequences, maxlen=None, dtype="int32", padding="pre", truncating="pre", value=0.0):
    """Pad/truncate each sequence to ``maxlen`` (default: the longest); returns (n, maxlen) array.

    ``truncating='pre'`` drops values from the start, 'post' from the end; ``padding`` likewise
    decides which side gets ``value``. Empty sequences become all ``value``.
    """
    if padding not in _SIDES:
        raise ValueError(f'Padding type "{padding}" not understood. Valid values: {list(_SIDES)}.')
    if truncating not in _SIDES:
        raise ValueError(f'Truncating type "{truncating}" not understood. Valid values: {list(_SIDES)}.')
    if not hasattr(sequences, "__len__"):
        raise ValueError("`sequences` must be iterable with a length (a list of lists or an array).")
    seqs = [np.asarray(s) for s in sequences]
    lengths = [len(s) for s in seqs]
    if maxlen is None:
        maxlen = max(lengths, default=0)
    sample_shape = next((s.shape[1:] for s in seqs if len(s)), ())
    is_str = np.issubdtype(np.dtype(dtype), np.str_) or np.issubdtype(np.dtype(dtype), np.object_)
    if isinstance(value, str) and not is_str:
        raise ValueError(f"`dtype` {dtype} is not compatible with `value`'s type: {type(value)}. "
                         "Use dtype=object for string padding.")
    out = np.full((len(seqs), maxlen) + tuple(sample_shape), value, dtype=dtype)
    for i, s in enumerate(seqs):
        if not len(s) or maxlen == 0:
            continue
        trunc = s[-maxlen:] if truncating == "pre" else s[:maxlen]
        if trunc.shape[1:] != tuple(sample_shape):
            raise ValueError(f"Shape of sample {trunc.shape[1:]} of sequence at position {i} is different "
                             f"from expected shape {tuple(sample_shape)}")
        if padding == "post":
            out[i, :len(trunc)] = trunc
        else:
            out[i, maxlen - len(trunc):] = trunc
    return out


__getattr__ = missing_names(__name__, "preprocessing.sequence", globals())  # unknown names: does Keras 3 have them?
