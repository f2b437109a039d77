"""``md.Module``: TensorFlow's ``tf.Module`` — a named container of variables and submodules.

It is a ``torch.nn.Module``: ``md.Variable``s assigned as attributes are its parameters, and methods
decorated with ``md.function(input_signature=...)`` are what ``md.saved_model.save`` exports.

Example:
    class Scale(md.Module):
        def __init__(self):
            super().__init__()
            self.w = md.Variable(torch.tensor(2.0))

        @md.function(input_signature=[md.TensorSpec([None], md.float32)])
        def __call__(self, x):
            return x * self.w
"""

from __future__ import annotations

import contextlib
import re

import torch


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class Module(torch.nn.Module):
    """A ``torch.nn.Module`` with ``tf.Module``'s ``name``, ``variables``, ``trainable_variables``, ``submodules``.

    Example:
        >>> class Dense(md.Module):
        ...     def __init__(self):
        ...         super().__init__(name="dense")
        ...         self.w = md.Variable(torch.ones(3, 2))
        >>> [tuple(v.shape) for v in Dense().trainable_variables]
        [(3, 2)]
    """

    def __init__(self, name: str | None = None):
        super().__init__()
        if name is not None and (not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][\w.\-/]*", name)):
            raise ValueError(f"{name!r} is not a valid module name. Module names must be valid Python identifiers "
                             "(e.g. a valid class name).")
        self._tf_name = name or _snake(type(self).__name__)

    def forward(self, *args, **kwargs):
        return self.__call__(*args, **kwargs)

    @property
    def name(self) -> str:
        return self._tf_name

    @property
    def name_scope(self):
        """A no-op context (PyTorch has no name scopes); kept so TF code runs."""
        return contextlib.nullcontext()

    @property
    def variables(self) -> tuple:
        """Every parameter and buffer of this module and its submodules."""
        return tuple(self.parameters()) + tuple(self.buffers())

    @property
    def trainable_variables(self) -> tuple:
        return tuple(p for p in self.parameters() if p.requires_grad)

    @property
    def non_trainable_variables(self) -> tuple:
        return tuple(p for p in self.parameters() if not p.requires_grad) + tuple(self.buffers())

    @property
    def submodules(self) -> tuple:
        return tuple(m for m in self.modules() if m is not self)

    @classmethod
    def with_name_scope(cls, method):
        return method
