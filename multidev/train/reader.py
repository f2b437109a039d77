"""Inspecting a checkpoint without the objects that wrote it: ``md.train.load_checkpoint``,
``list_variables``, ``load_variable`` (TensorFlow's "manually inspecting checkpoints").

Names are the checkpoint's storage keys: ``<object path>:<name in the object>``, e.g.
``model:layers.0.kernel``, ``optimizer:iterations``, ``optimizer:model:layers.0.kernel/exp_avg``,
``save_counter:value``. TensorFlow's names for the same values (``model/layers/0/kernel/.ATTRIBUTES/
VARIABLE_VALUE``, ``save_counter/.ATTRIBUTES/VARIABLE_VALUE``: ``tf_names``) are accepted wherever
a name is looked up: ``get_tensor``, ``has_tensor``, ``load_variable``, the maps' ``[...]``.

Example:
    >>> md.train.list_variables(md.train.latest_checkpoint("/tmp/ckpts"))
    [('model:layers.0.bias', [3]), ('model:layers.0.kernel', [4, 3]), ...]
"""

from __future__ import annotations

import os

import torch

from multidev._core.errors import NotFoundError
from multidev.train import files, state_file
from multidev.train.tf_names import tf_names


def _prefix(ckpt_dir_or_file) -> str:
    path = os.fspath(ckpt_dir_or_file)
    if os.path.isdir(path) and not files.exists(path):
        latest = state_file.latest_checkpoint(path)
        if latest is None:
            raise NotFoundError(f"Couldn't find a checkpoint in directory {path!r} (no 'checkpoint' index file).")
        return latest
    return path


class CheckpointReader:
    """Read-only access to one checkpoint's tensors (what ``load_checkpoint`` returns).

    Example:
        >>> reader = md.train.load_checkpoint("/tmp/ckpts")
        >>> reader.get_variable_to_shape_map()["model:layers.0.kernel"]
        [4, 3]
    """

    def __init__(self, prefix: str):
        self._prefix = prefix
        self._graph, self._tensors = files.read(prefix)
        self._tf_names = tf_names(self._graph["objects"])

    def _key(self, name: str) -> str | None:
        """The storage key of ``name`` (a storage key, or TensorFlow's name for the value)."""
        return name if name in self._tensors else self._tf_names.get(name)

    def get_tensor(self, name: str) -> torch.Tensor:
        """The stored value of ``name``; NotFoundError listing the names when it is absent."""
        key = self._key(name)
        if key is None:
            raise NotFoundError(f"Key {name!r} not found in checkpoint {self._prefix!r}; it holds "
                                f"{sorted(self._tensors)} (TensorFlow's names for them: {sorted(self._tf_names)}).")
        return self._tensors[key].clone()

    def has_tensor(self, name: str) -> bool:
        return self._key(name) is not None

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        return _KeyMap({k: list(t.shape) for k, t in self._tensors.items()}, self._key)

    def get_variable_to_dtype_map(self) -> dict[str, torch.dtype]:
        return _KeyMap({k: t.dtype for k, t in self._tensors.items()}, self._key)


class _KeyMap(dict):
    """The reader's maps, keyed by storage keys; ``[name]``, ``get`` and ``in`` also take TensorFlow's
    name for a value (the checkpoint guide's ``shape_from_key['net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE']``)."""

    def __init__(self, items: dict, resolve):
        super().__init__(items)
        self._resolve = resolve

    def __missing__(self, name):
        key = self._resolve(name) if isinstance(name, str) else None
        if key is None or key == name:
            raise KeyError(name)
        return self[key]

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, name) or (isinstance(name, str) and self._resolve(name) is not None)

    def get(self, name, default=None):
        return self[name] if name in self else default


def load_checkpoint(ckpt_dir_or_file) -> CheckpointReader:
    """A reader for a checkpoint prefix, or the latest checkpoint of a directory.

    Example:
        >>> reader = md.train.load_checkpoint("/tmp/ckpts")
        >>> reader.get_tensor("save_counter:value")
    """
    return CheckpointReader(_prefix(ckpt_dir_or_file))


def list_variables(ckpt_dir_or_file) -> list[tuple[str, list[int]]]:
    """``[(name, shape)]`` of every tensor in a checkpoint, sorted by name.

    Example:
        >>> md.train.list_variables("/tmp/ckpts/ckpt-1")
    """
    return sorted(load_checkpoint(ckpt_dir_or_file).get_variable_to_shape_map().items())


def load_variable(ckpt_dir_or_file, name: str) -> torch.Tensor:
    """The value of one tensor of a checkpoint.

    Example:
        >>> md.train.load_variable("/tmp/ckpts", "step:value")
    """
    return load_checkpoint(ckpt_dir_or_file).get_tensor(name)
