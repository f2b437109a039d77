"""``md.data`` datasets given to Keras 3's ``fit``/``evaluate``/``predict``, as Keras on TensorFlow takes ``tf.data``.

keras.io's distributed guide (``tf.`` -> ``md.``) passes batched ``md.data`` datasets as ``x`` and
``validation_data``; Keras 3's own data adapters know numpy, tf.data, torch DataLoaders, generators and
``PyDataset`` only ("Unrecognized data type"). Each such dataset is handed to Keras as a data adapter
that iterates it afresh every epoch (its element is the batch, as a tf.data element is), knows its
length from ``cardinality()`` and turns ``class_weight`` into sample weights as Keras does for tf.data.
``y``/``sample_weight`` beside a dataset are refused, as Keras refuses them beside tf.data. Installed at
``import multidev`` when Keras 3 (torch backend) was imported first, else at the first strategy scope entry.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from multidev.data import graph
from multidev.data.combine import unmarked
from multidev.data.dataset import Dataset
from multidev.distribute.batch_split import fills_in_order
from multidev.distribute.context_api import get_strategy

_state = {"adapter": None}   # Keras's DataAdapter subclass, made when Keras is patched


def install(keras: Any, quiet: bool = False) -> None:
    """Let Keras 3's data adapters take ``md.data`` datasets (idempotent; torch backend only). ``quiet`` (at
    ``import multidev``): a Keras this cannot patch is left alone (a strategy's scope entry refuses it, saying why)."""
    if _state["adapter"] is not None:
        return
    try:
        if keras.backend.backend() != "torch":
            return
        adapters = importlib.import_module("keras.src.trainers.data_adapters")
        base = importlib.import_module("keras.src.trainers.data_adapters.data_adapter").DataAdapter
        utils = importlib.import_module("keras.src.trainers.data_adapters.data_adapter_utils")
        original = adapters.get_data_adapter
    except (AttributeError, ImportError):
        if quiet:
            return
        raise
    to_weights = staticmethod(utils.class_weight_to_sample_weights)
    _state["adapter"] = type("MultidevDatasetAdapter", (_AdapterMethods, base), {"_to_weights": to_weights})

    @functools.wraps(original)
    def get_data_adapter(x, y=None, sample_weight=None, batch_size=None, steps_per_epoch=None, shuffle=False,
                         class_weight=None):
        if not isinstance(x, Dataset):
            return original(x, y=y, sample_weight=sample_weight, batch_size=batch_size,
                            steps_per_epoch=steps_per_epoch, shuffle=shuffle, class_weight=class_weight)
        _refuse_beside(y, sample_weight)
        return _state["adapter"](x if class_weight else _rows_recut(x), class_weight)   # TF maps for class_weight

    adapters.get_data_adapter = get_data_adapter


def _rows_recut(dataset: Dataset) -> Dataset:
    """As TF's steps with auto-sharding OFF/FILE/HINT on one worker: the rows re-cut in order into global
    batches of the dataset's batch size, a partial batch's rows followed by the next batch's
    (``batch_split.filled_steps``). A short last step's split changes no result: each replica's gradients
    are weighted by its share. Keras builds its adapter in the model's strategy's scope. With ``class_weight``
    Keras on TF maps the dataset first, and TF splits each batch of a mapped dataset on its own."""
    extended = get_strategy().extended
    size = graph.compute_batch_size(dataset)
    if fills_in_order(dataset, extended.num_workers, extended.num_local_replicas, size):
        return dataset.rebatch(size)
    return dataset


def _refuse_beside(y: Any, sample_weight: Any) -> None:
    for arg, value, what in (("y", y, "the targets"), ("sample_weight", sample_weight, "the sample weights")):
        if value is not None:
            raise ValueError(
                f"When providing `x` as a md.data.Dataset, `{arg}` should not be passed (got {arg} of type "
                f"{type(value).__name__}). Instead, {what} should be included as part of the md.data.Dataset: "
                "md.data.Dataset.from_tensor_slices((x, y, sample_weight)).batch(batch_size)."
            )


class _AdapterMethods:
    """The methods of Keras's ``DataAdapter`` subclass for one ``md.data`` dataset."""

    def __init__(self, dataset: Dataset, class_weight: dict | None):
        self._dataset, self._class_weight = dataset, class_weight
        size = dataset.cardinality()
        self._num_batches = int(size) if int(size) >= 0 else None

    def _batches(self):
        for element in self._dataset:
            element = unmarked(element)   # a zip of two batch sizes: plain tuples (Keras's tree takes no subclass)
            if self._class_weight is None:
                yield element
                continue
            if not isinstance(element, tuple) or len(element) != 2:
                raise ValueError(
                    "`class_weight` needs a md.data.Dataset of (inputs, targets) batches, to weigh each example by "
                    f"its target's class; its element has {_shape(element)}. Pass sample weights as the third "
                    "item of each element instead: from_tensor_slices((x, y, sample_weight))."
                )
            x, y = element
            yield x, y, self._to_weights(y, self._class_weight)

    def get_numpy_iterator(self):
        return self._batches()

    def get_torch_dataloader(self):   # the torch backend's epoch iterator iterates what this returns
        return self._batches()

    def get_jax_iterator(self):
        return self._batches()

    def get_tf_dataset(self):
        raise NotImplementedError("md.data datasets feed Keras 3 on its torch backend only.")

    @property
    def num_batches(self):
        return self._num_batches

    @property
    def batch_size(self):
        return None

    @property
    def has_partial_batch(self):
        return None

    @property
    def partial_batch_size(self):
        return None


def _shape(element: Any) -> str:
    if isinstance(element, tuple):
        return f"{len(element)} items"
    return f"one {type(element).__name__}"
