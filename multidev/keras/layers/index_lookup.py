"""IndexLookup: the vocabulary machinery behind ``StringLookup`` and ``IntegerLookup`` (Keras 3 semantics).

Index layout: with ``output_mode="int"`` the mask token (if any) is 0, then ``num_oov_indices``
OOV indices, then the vocabulary; in the other modes the mask token is dropped and the OOV indices
come first. ``adapt`` orders tokens by frequency, ties by descending token. Several OOV indices
spread unknown tokens by ``token % n`` (integers) or TensorFlow's ``Fingerprint64(token) % n``
(strings), as Keras on TensorFlow does.

Subclasses say how tokens are read (``_tokens``: python values) and how lookups are written back.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
import torch

from multidev._core.errors import InvalidArgumentError
from multidev.keras.layers.base import Layer
from multidev.keras.layers.host_inputs import HostInputs

OUTPUT_MODES = ("int", "one_hot", "multi_hot", "count", "tf_idf")


class IndexLookup(HostInputs, Layer):
    """Maps tokens to indices through a vocabulary (see the module doc); base of the lookup layers."""

    def __init__(self, max_tokens=None, num_oov_indices=1, mask_token=None, oov_token=None, vocabulary=None,
                 idf_weights=None, invert=False, output_mode="int", pad_to_max_tokens=False, sparse=False, **kwargs):
        super().__init__(**kwargs)
        kind = type(self).__name__
        if output_mode not in OUTPUT_MODES:
            raise ValueError(f"Invalid value for argument `output_mode` of {kind}: {output_mode!r}. "
                             f"Expected one of {list(OUTPUT_MODES)}.")
        if invert and output_mode != "int":
            raise ValueError(f"`output_mode` must be 'int' when `invert` is true. Received: output_mode={output_mode!r}")
        if max_tokens is not None and max_tokens <= 1:
            raise ValueError(f"If `max_tokens` is set for {kind}, it must be greater than 1. Received: max_tokens={max_tokens!r}")
        if not isinstance(num_oov_indices, int) or num_oov_indices < 0:
            raise ValueError(f"`num_oov_indices` must be an integer >= 0. Received: num_oov_indices={num_oov_indices!r}")
        if sparse:
            raise ValueError("`sparse=True` can only be used with the TensorFlow backend (multidev has no sparse "
                             "outputs); use the dense output.")
        if pad_to_max_tokens and max_tokens is None:
            raise ValueError("When `pad_to_max_tokens=True`, `max_tokens` must be set. Received: max_tokens=None")
        if idf_weights is not None and output_mode != "tf_idf":
            raise ValueError(f"`idf_weights` should only be set if output_mode is 'tf_idf'. Received: "
                             f"output_mode={output_mode!r}")
        self.max_tokens, self.num_oov_indices = max_tokens, num_oov_indices
        self.mask_token, self.oov_token = mask_token, oov_token
        self.invert, self.output_mode = bool(invert), output_mode
        self.pad_to_max_tokens, self.sparse = bool(pad_to_max_tokens), False
        self._vocab: list = []
        self._index: dict = {}
        self._idf: torch.Tensor | None = None
        if vocabulary is not None:
            self.set_vocabulary(vocabulary, idf_weights)
        elif idf_weights is not None:
            raise ValueError("`idf_weights` were given without a `vocabulary`: pass both, or adapt the layer.")
        self.built = True          # nothing to build from shapes (strings have none)

    # --- subclass hooks -------------------------------------------------------------------------------
    def _tokens(self, inputs) -> np.ndarray:
        """``inputs`` as a numpy array of python tokens (object dtype for strings, int64 for integers)."""
        raise NotImplementedError

    def _oov_bucket(self, token) -> int:
        raise NotImplementedError

    def _invert_output(self, tokens: np.ndarray):
        raise NotImplementedError

    def _read_vocabulary_file(self, path: str) -> list:
        raise NotImplementedError

    # --- layout -----------------------------------------------------------------------------------------
    def _oov_start(self) -> int:
        return 1 if self.mask_token is not None and self.output_mode == "int" else 0

    def _token_start(self) -> int:
        return self._oov_start() + self.num_oov_indices

    def _special_tokens(self) -> list:
        return [self.mask_token] * self._oov_start() + [self.oov_token] * self.num_oov_indices

    def get_vocabulary(self, include_special_tokens=True) -> list:
        """The tokens in index order (mask and OOV tokens first, unless ``include_special_tokens=False``)."""
        return (self._special_tokens() if include_special_tokens else []) + list(self._vocab)

    def vocabulary_size(self) -> int:
        """Number of indices, special ones included (the depth of one_hot/multi_hot/count outputs)."""
        return self._token_start() + len(self._vocab)

    # --- vocabulary ----------------------------------------------------------------------------------------
    def set_vocabulary(self, vocabulary, idf_weights=None) -> None:
        """Use ``vocabulary`` (a sequence, array, or a text file path with one token per line).

        It may start with the special tokens in their index order (then they are not repeated).
        """
        if isinstance(vocabulary, str):
            vocabulary = self._read_vocabulary_file(vocabulary)
        tokens = list(self._tokens(vocabulary).reshape(-1).tolist()) if len(vocabulary) else []
        specials = self._special_tokens()
        found_specials = len(specials) > 0 and tokens[:len(specials)] == specials
        if found_specials:
            tokens = tokens[len(specials):]
        repeated = sorted({t for t, c in Counter(tokens).items() if c > 1}, key=str)
        if repeated:
            raise ValueError(f"The passed vocabulary has at least one repeated term. Please uniquify your dataset. "
                             f"The repeated terms are: {repeated!r}")
        for what, token in (("mask", self.mask_token), ("OOV", self.oov_token)):
            if token is not None and token in tokens and (what == "mask" or self.num_oov_indices > 0):
                raise ValueError(
                    f"Found reserved {what} token at unexpected location in `vocabulary`. Note that passed "
                    "`vocabulary` does not need to include the OOV and mask tokens. Either remove all mask and OOV "
                    f"tokens, or include them only at the start of the vocabulary in precisely this order: "
                    f"{specials!r}. Received: {what}_token={token!r}, vocabulary={list(vocabulary)[:20]!r}")
        size = self._token_start() + len(tokens)
        if self.max_tokens is not None and size > self.max_tokens:
            raise ValueError(f"Attempted to set a vocabulary larger than the maximum vocab size. Received vocabulary "
                             f"size is {size}; `max_tokens` is {self.max_tokens}.")
        self._set_idf(idf_weights, len(tokens), found_specials)
        self._vocab = tokens
        self._index = {t: self._token_start() + i for i, t in enumerate(tokens)}

    def _set_idf(self, idf_weights, num_tokens: int, with_specials: bool) -> None:
        if self.output_mode != "tf_idf":
            self._idf = None
            return
        if idf_weights is None:
            raise ValueError("`idf_weights` must be set if output_mode is 'tf_idf' and a vocabulary is given.")
        weights = torch.as_tensor(np.asarray(idf_weights, dtype="float32")).reshape(-1)
        expected = num_tokens + (self.num_oov_indices if with_specials else 0)
        if weights.numel() != expected:
            raise ValueError(f"`idf_weights` must be the same length as the vocabulary ({expected}). Received: "
                             f"len(idf_weights)={weights.numel()}")
        if not with_specials:
            mean = weights.mean() if weights.numel() else torch.tensor(0.0)
            weights = torch.cat([mean.repeat(self.num_oov_indices), weights])
        self._idf = weights

    def adapt(self, data, batch_size=None, steps=None) -> None:
        """Learn the vocabulary (and document frequencies for tf_idf) from ``data``.

        ``data``: a list or array of tokens (or of samples), or an iterable of batches such as a
        ``md.data.Dataset``. Tokens are ordered by count, ties by descending token; ``max_tokens``
        caps the size, special indices included.
        """
        counts: Counter = Counter()
        documents: Counter = Counter()
        num_documents = 0
        for batch in self._batches(data, steps):
            arr = self._tokens(batch)
            counts.update(arr.reshape(-1).tolist())
            rows = arr.reshape(-1, arr.shape[-1]) if arr.ndim >= 2 else arr.reshape(-1, 1)
            num_documents += rows.shape[0]
            if self.output_mode == "tf_idf":
                for row in rows.tolist():
                    documents.update(set(row))
        for special in (self.mask_token, self.oov_token):
            counts.pop(special, None)
        ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
        if self.max_tokens is not None:
            ranked = ranked[:max(self.max_tokens - self._token_start(), 0)]
        tokens = [t for t, _ in ranked]
        idf = None
        if self.output_mode == "tf_idf":
            idf = [math.log(1 + num_documents / (1 + documents[t])) for t in tokens]
        self._vocab, self._index, self._idf = [], {}, None
        self.set_vocabulary(tokens, idf)

    @staticmethod
    def _batches(data, steps):
        if isinstance(data, (list, tuple, np.ndarray, torch.Tensor, str, bytes)):
            yield data
            return
        for i, batch in enumerate(data):
            if steps is not None and i >= steps:
                return
            yield batch

    # --- lookups ---------------------------------------------------------------------------------------------
    def _lookup(self, flat: list) -> list:
        """Indices for tokens in ``int`` layout; the mask token gives -1 in the other modes (dropped)."""
        oov_start, out = self._oov_start(), []
        get = self._index.get
        for token in flat:
            index = get(token)
            if index is None:
                if self.mask_token is not None and token == self.mask_token:
                    index = 0 if self.output_mode == "int" else -1
                elif self.num_oov_indices == 0:
                    raise InvalidArgumentError(
                        f"Token {token!r} is not in the vocabulary of {type(self).__name__} {self.name!r} and "
                        "num_oov_indices=0, so it has no index. Set num_oov_indices >= 1 to map unknown tokens.")
                elif self.num_oov_indices == 1:
                    index = oov_start
                else:
                    index = oov_start + self._oov_bucket(token)
            out.append(index)
        return out

    def _inverse(self, ids: torch.Tensor) -> np.ndarray:
        table = self.get_vocabulary()
        flat = ids.reshape(-1).tolist()
        oov_start, start = self._oov_start(), self._token_start()
        tokens = [table[i] if (i < oov_start or start <= i < len(table)) else self.oov_token for i in flat]
        out = np.empty(len(tokens), dtype=object)
        out[:] = tokens
        return out.reshape(tuple(ids.shape))

    def call(self, inputs):
        if not self._vocab and self.num_oov_indices == 0 and not self.invert:
            raise ValueError(f"{type(self).__name__} {self.name!r} has no vocabulary: call adapt(data) or pass "
                             "vocabulary=.")
        if self.invert:
            ids = torch.as_tensor(np.asarray(inputs) if not isinstance(inputs, torch.Tensor) else inputs).long()
            return self._invert_output(self._inverse(ids))
        tokens = self._tokens(inputs)
        ids = torch.tensor(self._lookup(tokens.reshape(-1).tolist()), dtype=torch.int64).reshape(tokens.shape)
        if self.output_mode == "int":
            return ids
        return self._encode(ids)

    def _encode(self, ids: torch.Tensor) -> torch.Tensor:
        """one_hot / multi_hot / count / tf_idf of ``ids`` (-1: dropped mask token), float32."""
        depth = self.max_tokens if self.pad_to_max_tokens else self.vocabulary_size()
        if ids.dim() == 0:
            ids = ids.reshape(1)
        if self.output_mode == "one_hot" and ids.shape[-1] != 1:
            ids = ids.unsqueeze(-1)
        if ids.dim() > 2 and self.output_mode != "one_hot":
            raise ValueError(f"output_mode={self.output_mode!r} supports inputs of rank up to 2; received shape "
                             f"{tuple(ids.shape)}.")
        keep = (ids >= 0).to(torch.float32)
        counts = torch.zeros(*ids.shape[:-1], depth, dtype=torch.float32)
        counts.scatter_add_(-1, ids.clamp_min(0), keep)
        if self.output_mode in ("one_hot", "multi_hot"):
            return (counts > 0).to(torch.float32)
        if self.output_mode == "tf_idf":
            idf = torch.zeros(depth, dtype=torch.float32)
            idf[:self._idf.numel()] = self._idf
            return counts * idf
        return counts

    def get_config(self) -> dict:
        return {**super().get_config(), "max_tokens": self.max_tokens, "num_oov_indices": self.num_oov_indices,
                "mask_token": self.mask_token, "oov_token": self.oov_token, "vocabulary": list(self._vocab) or None,
                "idf_weights": None if self._idf is None else self._idf[self.num_oov_indices:].tolist(),
                "invert": self.invert, "output_mode": self.output_mode, "pad_to_max_tokens": self.pad_to_max_tokens,
                "sparse": False}


__all__ = ["IndexLookup", "OUTPUT_MODES"]
