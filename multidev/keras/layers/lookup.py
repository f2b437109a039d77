"""``StringLookup`` and ``IntegerLookup``: map string / integer tokens to indices, as Keras 3 does.

torch has no string tensors: ``StringLookup`` takes Python strings (a str, nested lists, numpy
arrays of str/bytes/object) and returns int64 tensors; its inverse returns numpy object arrays
of str (TensorFlow returns bytes). ``IntegerLookup`` takes ints (lists, numpy arrays, tensors).

Example:
    >>> layer = md.keras.layers.StringLookup(vocabulary=["a", "b", "c", "d"])
    >>> layer([["a", "c", "d"], ["d", "z", "b"]])
    tensor([[1, 3, 4],
            [4, 0, 2]])
"""

from __future__ import annotations

import numpy as np
import torch

from multidev.keras.layers._fingerprint import fingerprint64
from multidev.keras.layers.index_lookup import IndexLookup


def _as_str(token, encoding: str) -> str:
    if isinstance(token, bytes):
        return token.decode(encoding)
    if isinstance(token, str):
        return token
    raise TypeError(f"StringLookup expects strings (str or bytes); received {token!r} of type "
                    f"{type(token).__name__}. Use IntegerLookup for integer tokens.")


class StringLookup(IndexLookup):
    """Maps strings to indices (Keras's ``StringLookup``; arguments and outputs as in Keras 3).

    Args: ``max_tokens``, ``num_oov_indices`` (1), ``mask_token`` (None), ``oov_token`` ("[UNK]"),
    ``vocabulary`` (list/array or a file with one token per line), ``idf_weights`` (tf_idf only),
    ``invert``, ``output_mode`` ("int", "one_hot", "multi_hot", "count", "tf_idf"),
    ``pad_to_max_tokens``, ``sparse`` (must be False), ``encoding`` ("utf-8").
    """

    def __init__(self, max_tokens=None, num_oov_indices=1, mask_token=None, oov_token="[UNK]", vocabulary=None,
                 idf_weights=None, invert=False, output_mode="int", pad_to_max_tokens=False, sparse=False,
                 encoding="utf-8", **kwargs):
        self.encoding = encoding
        super().__init__(max_tokens=max_tokens, num_oov_indices=num_oov_indices, mask_token=mask_token,
                         oov_token=oov_token, vocabulary=vocabulary, idf_weights=idf_weights, invert=invert,
                         output_mode=output_mode, pad_to_max_tokens=pad_to_max_tokens, sparse=sparse, **kwargs)

    def _tokens(self, inputs) -> np.ndarray:
        if isinstance(inputs, torch.Tensor):
            raise TypeError(f"StringLookup expects strings; received a {inputs.dtype} tensor (torch has no strings). "
                            "Pass a list or numpy array of str; use IntegerLookup for integer ids.")
        if isinstance(inputs, (str, bytes)):
            arr = np.empty((), dtype=object)
            arr[()] = inputs
        else:
            try:
                arr = np.asarray(inputs, dtype=object)
            except ValueError as err:
                raise ValueError(f"StringLookup needs a rectangular batch of strings (ragged inputs are not "
                                 f"supported): {err}") from None
        out = np.empty(arr.shape, dtype=object)
        out.reshape(-1)[:] = [_as_str(t, self.encoding) for t in arr.reshape(-1).tolist()] if arr.size else []
        return out

    def _oov_bucket(self, token) -> int:
        return fingerprint64(token.encode(self.encoding)) % self.num_oov_indices    # tf.strings.to_hash_bucket_fast

    def _invert_output(self, tokens: np.ndarray):
        return tokens

    def _read_vocabulary_file(self, path: str) -> list:
        with open(path, encoding=self.encoding) as f:
            return [line.rstrip("\r\n") for line in f]

    def get_config(self) -> dict:
        return {**super().get_config(), "encoding": self.encoding}


class IntegerLookup(IndexLookup):
    """Maps integers to indices (Keras's ``IntegerLookup``; ``oov_token=-1``, ``mask_token=None`` by default).

    Example:
        >>> layer = md.keras.layers.IntegerLookup(vocabulary=[12, 36, 1138, 42])
        >>> layer(np.array([[12, 1138, 42], [42, 1000, 36]]))
        tensor([[1, 3, 4],
                [4, 0, 2]])
    """

    def __init__(self, max_tokens=None, num_oov_indices=1, mask_token=None, oov_token=-1, vocabulary=None,
                 vocabulary_dtype="int64", idf_weights=None, invert=False, output_mode="int", sparse=False,
                 pad_to_max_tokens=False, **kwargs):
        if vocabulary_dtype != "int64":
            raise ValueError(f"Only `vocabulary_dtype='int64'` is supported at this time. Received: "
                             f"vocabulary_dtype={vocabulary_dtype!r}")
        super().__init__(max_tokens=max_tokens, num_oov_indices=num_oov_indices,
                         mask_token=None if mask_token is None else int(mask_token),
                         oov_token=None if oov_token is None else int(oov_token), vocabulary=vocabulary,
                         idf_weights=idf_weights, invert=invert, output_mode=output_mode,
                         pad_to_max_tokens=pad_to_max_tokens, sparse=sparse, **kwargs)

    def _tokens(self, inputs) -> np.ndarray:
        if isinstance(inputs, torch.Tensor):
            arr = inputs.detach().cpu().numpy()
        else:
            arr = np.asarray(inputs)
        if arr.dtype == object or arr.dtype.kind in "USf":
            if arr.dtype.kind == "f" and np.all(np.mod(arr, 1) == 0):
                return arr.astype(np.int64)
            raise TypeError(f"IntegerLookup expects integer tokens; received an array of dtype {arr.dtype}. "
                            "Use StringLookup for strings.")
        return arr.astype(np.int64)

    def _oov_bucket(self, token) -> int:
        return int(token) % self.num_oov_indices       # Keras: floormod for integer tokens

    def _invert_output(self, tokens: np.ndarray):
        return torch.as_tensor(tokens.astype(np.int64))

    def _read_vocabulary_file(self, path: str) -> list:
        with open(path, encoding="utf-8") as f:
            return [int(line) for line in f if line.strip()]

    def get_config(self) -> dict:
        return {**super().get_config(), "vocabulary_dtype": "int64"}


__all__ = ["StringLookup", "IntegerLookup"]
