"""``Discretization``: floats -> bucket ids by boundaries given or learnt with ``adapt`` (Keras 3's quantiles).

``adapt`` summarizes the data as Keras 3 does (its numpy ``summarize``/``merge``/``compress`` of
approximate quantiles, ``epsilon`` the tolerance), so learnt boundaries equal Keras's.

Example:
    >>> md.keras.layers.Discretization(bin_boundaries=[0.0, 1.0, 2.0])([[-1.5, 1.0, 3.4, 0.5]])
    tensor([[0, 2, 3, 1]])
"""

from __future__ import annotations

import numpy as np
import torch

from multidev.keras.layers.base import Layer
from multidev.keras.layers.category_encoding import CategoryEncoding

_MODES = ("int", "one_hot", "multi_hot", "count")


def _summarize(values: np.ndarray, epsilon: float) -> np.ndarray:
    values = np.sort(np.reshape(values, [-1]))
    step = max(np.size(values) / (1.0 / epsilon), 1)
    boundaries = values[int(step - 1)::int(step)]
    return np.stack([boundaries, np.ones_like(boundaries) * step])


def _compress(summary: np.ndarray, epsilon: float) -> np.ndarray:
    if summary.shape[1] * epsilon < 1:
        return summary
    percents = epsilon + np.arange(0.0, 1.0, epsilon)
    cum_weights = summary[1].cumsum()
    cum_percents = cum_weights / cum_weights[-1]
    new_bins = np.interp(percents, cum_percents, summary[0])
    cum_weights = np.interp(percents, cum_percents, cum_weights)
    new_weights = cum_weights - np.concatenate((np.array([0]), cum_weights[:-1]))
    return np.stack((new_bins, new_weights)).astype("float32")


def _merge(prev: np.ndarray, new: np.ndarray, epsilon: float) -> np.ndarray:
    merged = np.concatenate((prev, new), axis=1)
    return _compress(np.take(merged, np.argsort(merged[0]), axis=1), epsilon)


class Discretization(Layer):
    """Bucket each value: id ``i`` where ``bin_boundaries[i-1] <= x < bin_boundaries[i]`` (``np.digitize``)."""

    def __init__(self, bin_boundaries=None, num_bins=None, epsilon=0.01, output_mode="int", sparse=False, **kwargs):
        super().__init__(**kwargs)
        if output_mode not in _MODES:
            raise ValueError(f"Unknown value for `output_mode`. Allowed values are: {_MODES}. Received: "
                             f"output_mode={output_mode!r}")
        if sparse:
            raise ValueError("Discretization(sparse=True) is not supported by md.keras: use sparse=False.")
        if num_bins is not None and num_bins < 0:
            raise ValueError(f"`num_bins` must be greater than or equal to 0. Received: `num_bins={num_bins!r}`")
        if num_bins is not None and bin_boundaries is not None:
            raise ValueError(f"Both `num_bins` and `bin_boundaries` should not be set. Received: "
                             f"`num_bins={num_bins!r}` and `bin_boundaries={bin_boundaries!r}`")
        if num_bins is None and bin_boundaries is None:
            raise ValueError("You need to set either `num_bins` or `bin_boundaries`.")
        self.bin_boundaries = None if bin_boundaries is None else list(bin_boundaries)
        self.num_bins, self.epsilon, self.output_mode, self.sparse = num_bins, epsilon, output_mode, sparse
        self.built = True

    def adapt(self, data, batch_size=None, steps=None):
        """Learn ``num_bins - 1`` boundaries from an array or an iterable of batches (a Dataset)."""
        if self.num_bins is None:
            raise ValueError("Cannot adapt a Discretization layer that has been initialized with `bin_boundaries`, "
                             "use `num_bins` instead.")
        summary = np.array([[], []], dtype="float32")
        batches = [data] if isinstance(data, (np.ndarray, torch.Tensor, list, tuple)) else data
        for i, batch in enumerate(batches):
            if steps is not None and i >= steps:
                break
            values = batch.detach().cpu().numpy() if isinstance(batch, torch.Tensor) else np.asarray(batch)
            summary = _merge(_summarize(values.astype("float32"), self.epsilon), summary, self.epsilon)
        self.bin_boundaries = _compress(summary, 1.0 / self.num_bins)[0, :-1].tolist()

    def call(self, inputs):
        if self.bin_boundaries is None:
            raise ValueError("You need to either pass the `bin_boundaries` argument at construction time or call "
                             "`adapt(dataset)` before you can start using the `Discretization` layer.")
        x = torch.as_tensor(np.asarray(inputs) if not isinstance(inputs, torch.Tensor) else inputs)
        edges = torch.tensor(self.bin_boundaries, dtype=torch.float64)
        ids = torch.bucketize(x.to(torch.float64), edges, right=True)
        if self.output_mode == "int":
            return ids
        return CategoryEncoding(len(self.bin_boundaries) + 1, output_mode=self.output_mode)(ids)

    def _convert_inputs(self, inputs):
        return inputs

    def get_config(self):
        return {**super().get_config(), "bin_boundaries": self.bin_boundaries, "num_bins": self.num_bins,
                "epsilon": self.epsilon, "output_mode": self.output_mode, "sparse": self.sparse}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        boundaries = config.pop("bin_boundaries", None)
        if config.get("num_bins") is None:
            return cls(bin_boundaries=boundaries, **config)
        layer = cls(**config)
        layer.bin_boundaries = boundaries
        return layer
