"""String elements as a ``for`` loop hands them out: ``str`` and numpy object arrays that also have
TF's ``.numpy()`` (bytes), because the tf.data guide prints text with ``line.numpy()``.

    >>> import multidev as md
    >>> line = next(iter(md.data.Dataset.from_tensor_slices(["a", "b"])))
    >>> line == "a", line.numpy()
    (True, b'a')

torch has no string tensors: a string component stays a Python ``str`` (a batch of them a numpy
object array); these subclasses only add ``numpy()``, so every str/ndarray use keeps working.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from multidev.data import structure


class Text(str):
    """A string element: a ``str`` whose ``numpy()`` gives UTF-8 bytes, as TF's string scalar."""

    __slots__ = ()

    def numpy(self) -> bytes:
        return self.encode("utf-8")


class TextArray(np.ndarray):
    """A batch of string elements: a numpy object array whose ``numpy()`` holds bytes, as TF's."""

    def __repr__(self) -> str:
        return repr(np.asarray(self))

    def __getitem__(self, key: Any) -> Any:
        item = super().__getitem__(key)
        return Text(item) if isinstance(item, str) and type(item) is not Text else item   # batch[0].numpy()

    def numpy(self) -> np.ndarray:
        plain = np.asarray(self)
        return np.array([s.encode("utf-8") if isinstance(s, str) else s for s in plain.flat],
                        dtype=object).reshape(plain.shape)


def _leaf(component: Any) -> Any:
    if isinstance(component, str) and type(component) is not Text:
        return Text(component)
    if type(component) is np.ndarray and component.dtype == object:
        return component.view(TextArray)
    return component


def _has_text(element: Any) -> bool:
    return any(isinstance(c, (str, np.ndarray)) for c in structure.flatten(element))


def user_facing(element: Any) -> Any:
    """``element`` with its string components given ``numpy()`` (tensors pass through untouched)."""
    if isinstance(element, torch.Tensor):
        return element
    if isinstance(element, (str, np.ndarray)):
        return _leaf(element)
    if type(element) is tuple and all(isinstance(c, torch.Tensor) for c in element):   # (features, labels)
        return element
    if not _has_text(element):
        return element
    return structure.map_structure(_leaf, element)


__all__ = ["Text", "TextArray", "user_facing"]
