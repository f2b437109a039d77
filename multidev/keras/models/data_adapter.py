"""Turns ``fit``/``evaluate``/``predict`` inputs into batches of torch tensors.

Arrays (numpy, torch, lists/dicts of them) are sliced into batches (shuffled per epoch when
asked); anything else with ``__iter__`` is a dataset whose items are ``x``, ``(x, y)`` or
``(x, y, sample_weight)`` batches (``md.data.Dataset``, ``torch.utils.data.DataLoader``,
generators). Its length comes from ``len()`` or ``cardinality()`` when known.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import torch

from multidev.data.cardinality import INFINITE_CARDINALITY
from multidev.keras.layers.keras_tensor import flatten, map_structure
from multidev.values.distributed import PerReplica, map_structure as map_leaves


def to_tensor(x):
    """numpy/list/tensor -> tensor; float64 becomes float32 (Keras floatx)."""
    if isinstance(x, torch.Tensor):
        return x.float() if x.dtype == torch.float64 else x
    arr = np.asarray(x)
    if arr.dtype.kind in "US":
        raise ValueError(f"Failed to convert a NumPy array to a Tensor (strings are not supported): received an array "
                         f"of dtype={arr.dtype} with shape {arr.shape}, e.g. {arr.flat[0] if arr.size else x!r}. Map "
                         "strings to numbers first (a StringLookup or TextVectorization layer called on the data).")
    if arr.dtype == object:
        raise ValueError(f"Failed to convert a NumPy array to a Tensor (unsupported object type). Received an array "
                         f"of dtype=object with shape {arr.shape}; pad ragged sequences first (pad_sequences).")
    t = torch.from_numpy(np.ascontiguousarray(arr))
    return t.float() if t.dtype == torch.float64 else t


def _is_array(x) -> bool:
    return isinstance(x, (np.ndarray, torch.Tensor)) or np.isscalar(x)


def is_array_structure(x) -> bool:
    """Arrays, or lists/tuples/dicts of arrays (multi-input models), or plain nested lists of numbers."""
    if _is_array(x):
        return True
    if isinstance(x, dict):
        return all(is_array_structure(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return True
    return False


def _is_text(x) -> bool:
    """A numpy array of str (md.constant's text, md.data's batches of it)."""
    return isinstance(x, np.ndarray) and (x.dtype.kind in "US" or x.dtype == object and x.size > 0 and all(
        isinstance(v, (str, bytes)) for v in x.flat))


def _convert(x):
    if _is_text(x):   # kept for the model's first layer (text_classification's export_model.predict(examples))
        return np.asarray(x, dtype=object)
    if isinstance(x, (list, tuple)) and x and all(isinstance(i, (np.ndarray, torch.Tensor)) for i in x):
        return [to_tensor(i) for i in x]
    if isinstance(x, dict):
        return {k: _convert(v) for k, v in x.items()}
    return to_tensor(x)


def _weights(sample_weight):
    """Sample weights as float tensors: one array, or one per output (a dict by output name, a list of arrays)."""
    if isinstance(sample_weight, dict) or isinstance(sample_weight, (list, tuple)) and sample_weight and all(
            isinstance(w, (np.ndarray, torch.Tensor)) for w in sample_weight):
        return map_structure(lambda w: to_tensor(w).float(), sample_weight)
    return to_tensor(sample_weight).float()


def _sizes(structure):
    return [int(t.shape[0]) for t in flatten(structure) if isinstance(t, (torch.Tensor, np.ndarray))]


def unpack_x_y_sample_weight(data):
    """Split a batch into ``(x, y, sample_weight)`` (missing parts are None)."""
    if isinstance(data, list):
        data = tuple(data)
    if not isinstance(data, tuple):
        return data, None, None
    if len(data) == 1:
        return data[0], None, None
    if len(data) == 2:
        return data[0], data[1], None
    if len(data) == 3:
        return data
    raise ValueError(f"Data is expected to be in format `x`, `(x,)`, `(x, y)`, or `(x, y, sample_weight)`, "
                     f"found a tuple of {len(data)} elements.")


def pack_x_y_sample_weight(x, y=None, sample_weight=None):
    """Inverse of ``unpack_x_y_sample_weight``. Without ``y``: ``x`` itself unless it is a tuple or list (then
    ``(x,)``), as tf.keras and Keras 3 pack it, so ``fit(x)``'s ``train_step(data)`` gets the images themselves
    (keras.io's Keras 3 VAE feeds ``data`` to its encoder as it is)."""
    if y is None:
        return (x,) if isinstance(x, (tuple, list)) else x
    return (x, y) if sample_weight is None else (x, y, sample_weight)


def _batch_size(batch_size) -> int:
    """``batch_size`` as a positive int (None: 32, Keras's default); TypeError/ValueError otherwise."""
    if batch_size is None:
        return 32
    if isinstance(batch_size, (bool, np.bool_)) or not isinstance(batch_size, (int, np.integer)):
        raise TypeError(f"`batch_size` must be a positive integer. Received: batch_size={batch_size!r} "
                        f"of type {type(batch_size).__name__}.")
    if batch_size <= 0:
        raise ValueError(f"`batch_size` must be a positive integer. Received: batch_size={batch_size!r}")
    return int(batch_size)


class ArrayAdapter:
    """Batches of in-memory arrays; ``shuffle`` permutes the samples each epoch."""

    infinite = False   # arrays end

    def __init__(self, x, y=None, sample_weight=None, batch_size=None, shuffle=False):
        self.x, self.y = _convert(x), (_convert(y) if y is not None else None)
        self.sample_weight = _weights(sample_weight) if sample_weight is not None else None
        self.batch_size = _batch_size(batch_size)
        self.shuffle = shuffle
        self._check_sizes()

    def _check_sizes(self):
        parts = {"x": _sizes(self.x), "y": _sizes(self.y) if self.y is not None else [],
                 "sample_weight": _sizes(self.sample_weight) if self.sample_weight is not None else []}
        all_sizes = {s for sizes in parts.values() for s in sizes}
        if len(all_sizes) > 1:
            detail = "\n".join(f"  {k} sizes: {', '.join(map(str, v))}" for k, v in parts.items() if v)
            raise ValueError(f"Data cardinality is ambiguous. Make sure all arrays contain the same number of "
                             f"samples.\n{detail}")
        self.num_samples = all_sizes.pop() if all_sizes else 0

    def __len__(self) -> int:
        return math.ceil(self.num_samples / self.batch_size)

    def _take(self, idx):
        def take(t):
            if isinstance(t, np.ndarray):   # text
                return t[idx.numpy() if isinstance(idx, torch.Tensor) else idx]
            return t[idx] if isinstance(t, torch.Tensor) else t
        return pack_x_y_sample_weight(map_structure(take, self.x),
                                      map_structure(take, self.y) if self.y is not None else None,
                                      None if self.sample_weight is None else map_structure(take, self.sample_weight))

    def _index_device(self) -> torch.device | None:
        """The one device every array is on when it is not the CPU: shuffled indices go there once an epoch
        (indexing GPU arrays with host indices copied the indices to the device for every batch and array)."""
        leaves = [t for t in flatten([self.x, self.y, self.sample_weight]) if t is not None]
        if not leaves or not all(isinstance(t, torch.Tensor) for t in leaves):
            return None
        devices = {t.device for t in leaves}
        device = devices.pop()
        return device if not devices and device.type != "cpu" else None

    def __iter__(self):
        n, bs = self.num_samples, self.batch_size
        if self.shuffle == "batch":
            order, device = torch.randperm(len(self)), self._index_device()
            spans = [torch.arange(i * bs, min((i + 1) * bs, n), device=device) for i in order.tolist()]
        elif self.shuffle:
            perm, device = torch.randperm(n), self._index_device()
            perm = perm if device is None else perm.to(device)
            spans = [perm[i:i + bs] for i in range(0, n, bs)]
        else:
            spans = [slice(i, min(i + bs, n)) for i in range(0, n, bs)]
        for idx in spans:
            yield self._take(idx)


class IterableAdapter:
    """A dataset-like iterable of batches; a fresh iterator per epoch."""

    def __init__(self, data):
        self.data = data
        self.length = known_length(data)
        self.infinite = is_infinite(data)
        self.worker_part = _worker_part(data)

    def __len__(self) -> int:
        if self.length is None:
            raise TypeError("length unknown")
        return self.length

    def __iter__(self):
        for item in self.data:
            item = tuple(item) if isinstance(item, list) else item
            # already this worker's part: one replica's PerReplica, never split across the workers again
            yield map_leaves(lambda t: PerReplica((t,)), item) if self.worker_part else item


class StepsOfTheDataset:
    """A worker's own stream read for as many steps per pass as the program's dataset has batches.

    TensorFlow's Keras infers the steps of an epoch from the dataset's cardinality before distributing
    it; each worker's own stream (OFF/FILE/HINT) is rebatched to ``batch / num_workers``, so it holds
    more batches, and a pass of ``fit``/``evaluate`` stops after the first ``cardinality`` of them
    (with OFF, 10 examples in batches of 4 on 2 workers: each worker's examples 0-5). An unknown
    cardinality reads the whole stream, as TensorFlow does."""

    def __init__(self, distributed: Any, steps: int):
        self.distributed, self._steps = distributed, steps

    def __iter__(self):
        return itertools.islice(iter(self.distributed), self._steps)

    def __len__(self) -> int:
        return self._steps

    def __getattr__(self, name: str) -> Any:   # element_spec, options, ...: the distributed dataset's
        return getattr(self.distributed, name)


def _worker_part(data) -> bool:
    """Whether ``data`` is a distributed dataset (or its iterator) of several workers with one replica
    each: its batches are plain tensors, but only this worker's part of the global batch."""
    from multidev.distribute import input_lib

    data = data.distributed if isinstance(data, StepsOfTheDataset) else data
    owner = data._dataset if isinstance(data, input_lib.DistributedIterator) else data
    if not isinstance(owner, (input_lib.DistributedDataset, input_lib.DistributedDatasetsFromFunction)):
        return False
    extended = owner._strategy.extended
    return extended.num_workers > 1 and extended.num_local_replicas == 1


def is_infinite(data) -> bool:
    """Whether ``data`` says it never ends (``cardinality() == INFINITE_CARDINALITY``: a ``repeat()``)."""
    if not callable(getattr(data, "cardinality", None)):
        return False
    c = data.cardinality()
    return int(c.item() if hasattr(c, "item") else c) == INFINITE_CARDINALITY


def known_length(data):
    """Number of batches from ``len()`` or ``cardinality()``; None when unknown or infinite."""
    try:
        n = len(data)
    except TypeError:
        n = None
    if n is None and callable(getattr(data, "cardinality", None)):
        c = data.cardinality()
        c = int(c.item() if hasattr(c, "item") else c)
        n = c if c >= 0 else None
    return n


def make_adapter(x, y=None, sample_weight=None, batch_size=None, shuffle=False):
    """The adapter for ``x``: arrays or a dataset (then ``y``/``sample_weight`` must be None)."""
    if x is None:
        raise ValueError("Expected input data `x`, received None.")
    if isinstance(x, (str, bytes)):
        raise ValueError(f"Unrecognized data type: x={x!r} (of type {type(x).__name__}). Pass numpy arrays, torch "
                         "tensors, or an iterable of (x, y) batches such as md.data.Dataset.")
    if is_array_structure(x):
        return ArrayAdapter(x, y, sample_weight, batch_size, shuffle)
    from multidev.keras.utils.py_dataset import PyDataset, PyDatasetAdapter   # noqa: PLC0415 - utils imports models
    if isinstance(x, PyDataset):
        _no_targets_beside(x, y, sample_weight)
        return PyDatasetAdapter(x, shuffle)
    if not hasattr(x, "__iter__"):
        raise ValueError(f"Unrecognized data type: x={x!r} (of type {type(x).__name__}). Pass numpy arrays, torch "
                         "tensors, or an iterable of (x, y) batches such as md.data.Dataset.")
    _no_targets_beside(x, y, sample_weight)
    # batch_size with a dataset is ignored (the dataset yields batches), as Keras 3 on TensorFlow does
    return IterableAdapter(x)


def _no_targets_beside(x, y, sample_weight) -> None:
    for name, value in (("y", y), ("sample_weight", sample_weight)):
        if value is not None:
            raise ValueError(f"`{name}` argument is not supported when using a dataset as input (got {type(x).__name__}); "
                             "yield (x, y, sample_weight) from the dataset instead.")


def split_for_validation(x, y, sample_weight, validation_split):
    """Keras's validation_split: the last fraction of the (unshuffled) arrays becomes validation data."""
    if not 0.0 < validation_split < 1.0:
        raise ValueError(f"`validation_split` must be in [0, 1). Received: validation_split={validation_split!r}")
    if not is_array_structure(x):
        raise ValueError(f"`validation_split` is only supported for tensors or NumPy arrays, found a "
                         f"{type(x).__name__}. Pass validation_data instead.")
    whole = ArrayAdapter(x, y, sample_weight, 1)
    cut = int(math.floor(whole.num_samples * (1.0 - validation_split)))
    if cut == 0 or cut == whole.num_samples:
        raise ValueError(f"Training data contains {whole.num_samples} samples, which is not sufficient to split it "
                         f"into a validation and training set as specified by `validation_split={validation_split}`.")

    def part(t, sl):
        return map_structure(lambda a: a[sl] if isinstance(a, torch.Tensor) else a, t) if t is not None else None
    train = tuple(part(t, slice(0, cut)) for t in (whole.x, whole.y, whole.sample_weight))
    val = tuple(part(t, slice(cut, None)) for t in (whole.x, whole.y, whole.sample_weight))
    return train, val
