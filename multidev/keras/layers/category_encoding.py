"""``CategoryEncoding``: integer category ids -> one-hot, multi-hot or count vectors (Keras 3's rules).

Example:
    md.keras.layers.CategoryEncoding(num_tokens=4, output_mode="one_hot")(torch.tensor([[1], [3]]))
"""

from __future__ import annotations

import torch

from multidev.keras.layers.base import Layer
from multidev.keras.ops import nn as ops_nn

_MODES = ("one_hot", "multi_hot", "count")


class CategoryEncoding(Layer):
    """Encode ids in [0, num_tokens): 'one_hot' per id (a trailing axis of 1 dropped), 'multi_hot' per
    sample (rank-1 input is one sample), 'count' per sample (optionally weighted by ``count_weights``)."""

    def __init__(self, num_tokens=None, output_mode="multi_hot", sparse=False, **kwargs):
        super().__init__(**kwargs)
        if output_mode not in _MODES:
            raise ValueError(f"Unknown arg for output_mode: {output_mode!r}. Expected one of {list(_MODES)}.")
        if num_tokens is None or num_tokens < 1:
            raise ValueError(f"`num_tokens` must be >= 1. Received: num_tokens={num_tokens!r}.")
        if sparse:
            raise ValueError("CategoryEncoding(sparse=True) is not supported by md.keras: use sparse=False.")
        self.num_tokens, self.output_mode, self.sparse = num_tokens, output_mode, sparse

    def call(self, inputs, count_weights=None):
        if count_weights is not None and self.output_mode != "count":
            raise ValueError("`count_weights` is not used when `output_mode` is not `'count'`. "
                             f"Received `count_weights={count_weights!r}`.")
        ids = torch.as_tensor(inputs)
        if ids.ndim == 0:
            ids = ids.unsqueeze(-1)
        dtype = self._compute_torch_dtype
        if self.output_mode == "multi_hot":
            return ops_nn.multi_hot(ids, self.num_tokens, dtype=dtype)
        if self.output_mode == "one_hot":
            if ids.ndim > 1 and ids.shape[-1] == 1:
                ids = ids.squeeze(-1)
            return ops_nn.one_hot(ids, self.num_tokens, dtype=dtype)
        encoded = ops_nn.one_hot(ids, self.num_tokens, dtype=dtype)
        if count_weights is not None:
            encoded = encoded * torch.as_tensor(count_weights, dtype=dtype).unsqueeze(-1)
        return encoded.sum(dim=1 if ids.ndim > 1 else 0)

    def get_config(self):
        return {**super().get_config(), "num_tokens": self.num_tokens, "output_mode": self.output_mode,
                "sparse": self.sparse}
