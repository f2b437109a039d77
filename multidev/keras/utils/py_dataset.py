"""Keras 3's ``keras.utils.PyDataset`` (alias ``Sequence``): a Python object that returns batch ``index``.

``fit`` reads it as Keras 3 does: ``on_epoch_begin``, the batches ``0 .. num_batches - 1`` (in an order shuffled
with Python's ``random.shuffle`` when ``fit(shuffle=True)``, Keras 3's default), then ``on_epoch_end``.
``workers``/``use_multiprocessing`` are taken but the batches are read in this thread, in order: the numbers a
``__getitem__`` draws (keras.io's metric learning picks pairs with ``random.choice``) are those of Keras 3's
single worker. Each batch is a global batch: on replicas its leading axis is split as an array's is.

Example:
    class Pairs(md.keras.utils.PyDataset):
        def __len__(self):
            return 10
        def __getitem__(self, index):
            return x[index * 32:(index + 1) * 32], y[index * 32:(index + 1) * 32]
    model.fit(Pairs(), epochs=2)
"""

from __future__ import annotations

import random


class PyDataset:
    """Base class of a dataset of batches by index (override ``__getitem__`` and ``__len__`` or ``num_batches``)."""

    def __init__(self, workers=1, use_multiprocessing=False, max_queue_size=10):
        self._workers, self._use_multiprocessing, self._max_queue_size = workers, use_multiprocessing, max_queue_size

    @property
    def workers(self):
        return self._workers

    @property
    def use_multiprocessing(self):
        return self._use_multiprocessing

    @property
    def max_queue_size(self):
        return self._max_queue_size

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__(self, index), returning batch "
                                  "`index` as (x, y) or (x, y, sample_weight) or x.")

    @property
    def num_batches(self):
        """The number of batches: ``len(self)`` (override it for a dataset without ``__len__``)."""
        if type(self).__len__ is PyDataset.__len__:
            raise NotImplementedError(f"{type(self).__name__} must implement __len__ (or the num_batches property).")
        return len(self)

    def __len__(self):
        return self.num_batches

    def on_epoch_begin(self):
        """Called before each epoch of ``fit`` reads the batches."""

    def on_epoch_end(self):
        """Called after each epoch of ``fit`` read the batches."""


Sequence = PyDataset


class PyDatasetAdapter:
    """``fit``'s reader of a ``PyDataset``: one pass of its batches per epoch, shuffled as Keras 3 shuffles them."""

    def __init__(self, dataset: PyDataset, shuffle: bool):
        self.data, self.shuffle = dataset, shuffle is True   # shuffle="batch" means nothing here: Keras's too
        self.length, self.infinite, self.worker_part = int(dataset.num_batches), False, False

    def __len__(self) -> int:
        return self.length

    def __iter__(self):
        self.data.on_epoch_begin()
        indices = list(range(self.length))
        if self.shuffle:
            random.shuffle(indices)
        for index in indices:
            item = self.data[index]
            yield tuple(item) if isinstance(item, list) else item
        self.data.on_epoch_end()
