"""``Hashing``: values -> ``num_bins`` bins by TensorFlow's string hashes, so bins equal Keras's on TF.

Values are hashed as strings (integers and floats through their int64 decimal form, as
``tf.as_string``): FarmHash Fingerprint64 (``to_hash_bucket_fast``), or SipHash-2-4 keyed by
``salt`` (``to_hash_bucket_strong``). With ``mask_value`` bin 0 is reserved for it.

Example:
    >>> md.keras.layers.Hashing(num_bins=3)([["A"], ["B"], ["C"], ["D"], ["E"]])
    tensor([[1], [0], [1], [1], [2]])
"""

from __future__ import annotations

import numpy as np
import torch

from multidev.keras.layers._fingerprint import fingerprint64
from multidev.keras.layers._siphash import siphash24
from multidev.keras.layers.base import Layer
from multidev.keras.layers.host_inputs import HostInputs
from multidev.keras.layers.category_encoding import CategoryEncoding

_MODES = ("int", "one_hot", "multi_hot", "count")


def _as_strings(inputs) -> np.ndarray:
    """An object array of bytes: str/bytes kept, numbers as the decimal of their int64 (TF casts floats)."""
    arr = inputs.detach().cpu().numpy() if isinstance(inputs, torch.Tensor) else np.asarray(inputs)
    if arr.dtype.kind == "f":
        arr = arr.astype("int64")
    out = np.empty(arr.shape, dtype=object)
    out.reshape(-1)[:] = [v if isinstance(v, bytes) else str(v).encode() for v in arr.reshape(-1).tolist()]
    return out


class Hashing(HostInputs, Layer):
    """Hash each value into ``[0, num_bins)`` (Keras 3's ``Hashing``; ``output_mode`` as CategoryEncoding's)."""

    def __init__(self, num_bins, mask_value=None, salt=None, output_mode="int", sparse=False, **kwargs):
        super().__init__(**kwargs)
        if num_bins is None or num_bins <= 0:
            raise ValueError(f"The `num_bins` for `Hashing` cannot be `None` or non-positive values. Received: "
                             f"num_bins={num_bins!r}.")
        if output_mode not in _MODES:
            raise ValueError(f"Invalid value for argument `output_mode`. Expected one of {_MODES}. Received: "
                             f"output_mode={output_mode!r}")
        if sparse:
            raise ValueError("Hashing(sparse=True) is not supported by md.keras (torch has no sparse string "
                             "features here): use sparse=False.")
        if salt is not None and not isinstance(salt, int) and not (isinstance(salt, (tuple, list)) and len(salt) == 2):
            raise ValueError(f"The `salt` argument for `Hashing` can only be a tuple of size 2 integers, or a single "
                             f"integer. Received: salt={salt!r}.")
        self.num_bins, self.mask_value, self.output_mode, self.sparse = num_bins, mask_value, output_mode, sparse
        self.salt = None if salt is None else ([salt, salt] if isinstance(salt, int) else list(salt))
        self._encoder = None if output_mode == "int" else CategoryEncoding(num_bins, output_mode=output_mode)
        self.built = True

    def _bin(self, value: bytes, bins: int) -> int:
        if self.salt is not None:
            return siphash24(self.salt[0], self.salt[1], value) % bins
        return fingerprint64(value) % bins

    def call(self, inputs):
        values = _as_strings(inputs)
        flat = values.reshape(-1).tolist()
        mask = None
        bins = self.num_bins
        if self.mask_value is not None and bins > 1:
            bins -= 1
            target = _as_strings(np.array([self.mask_value]))[0]
            mask = [v == target for v in flat]
        ids = [self._bin(v, bins) for v in flat]
        if mask is not None:
            ids = [0 if m else i + 1 for i, m in zip(ids, mask)]
        out = torch.tensor(ids, dtype=torch.int64).reshape(values.shape)
        return out if self._encoder is None else self._encoder(out)

    def get_config(self):
        return {**super().get_config(), "num_bins": self.num_bins, "salt": self.salt, "mask_value": self.mask_value,
                "output_mode": self.output_mode, "sparse": self.sparse}
