"""Inspecting a checkpoint without the objects that wrote it: ``md.train.load_checkpoint``,
``list_variables``, ``load_variable`` (TensorFlow's "manually inspecting checkpoints").

Names are the checkpoint's storage keys: ``<object path>:<name in the object>``, e.g.
``model:layers.0.kernel``, ``optimizer:iterations``, ``optimizer:model:layers.0.kernel/exp_avg``,
``save_counter:value`` (TensorFlow's own names, ``.../.ATTRIBUTES/VARIABLE_VALUE``, differ).

Example:
    >>> md.train.list_variables(md.train.latest_checkpoint("/tmp/ckpts"))
    [('model:layers.0.bias', [3]), ('model:layers.0.kernel', [4, 3]), ...]
"""

from __future__ import annotations

import os

import torch

from multidev._core.errors import NotFoundError
from multidev.train import files, state_file


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

    def get_tensor(self, name: str) -> torch.Tensor:
        """The stored value of ``name``; NotFoundError listing the names when it is absent."""
        if name not in self._tensors:
            raise NotFoundError(f"Key {name!r} not found in checkpoint {self._prefix!r}; it holds "
                                f"{sorted(self._tensors)}.")
        return self._tensors[name].clone()

    def has_tensor(self, name: str) -> bool:
        return name in self._tensors

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        return {k: list(t.shape) for k, t in self._tensors.items()}

    def get_variable_to_dtype_map(self) -> dict[str, torch.dtype]:
        return {k: t.dtype for k, t in self._tensors.items()}


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
