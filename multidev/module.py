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

import functools
import re

import torch

from multidev import module_walk
from multidev._core import name_scopes
from multidev._core.eager_tensor import readable


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

    def __new__(cls, *args, **kwargs):
        """A ``tf.Module`` subclass need not call ``super().__init__()`` (the tf.function guide's ``Count``
        makes none): torch's module state is set up here, before any ``__init__``."""
        self = super().__new__(cls)
        torch.nn.Module.__init__(self)
        self._tf_name = _snake(cls.__name__)
        self._outer_scope = name_scopes.current()   # TensorFlow captures the scope a module is made in
        return self

    def __init__(self, name: str | None = None):
        super().__init__()
        if name is not None and (not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][\w.\-/]*", name)):
            raise ValueError(f"{name!r} is not a valid module name. Module names must be valid Python identifiers "
                             "(e.g. a valid class name).")
        self._tf_name = name or _snake(type(self).__name__)

    def __init_subclass__(cls, **kwargs):
        """A subclass's own ``__call__`` hands back results that ``.numpy()`` reads, as TensorFlow's eager
        tensors (the basic_training_loops guide's ``model(3.0).numpy()``), still in the autograd graph."""
        super().__init_subclass__(**kwargs)
        call = cls.__dict__.get("__call__")
        if callable(call) and not getattr(call, "_md_readable", False):
            @functools.wraps(call)
            def readable_call(self, *args, **kwargs):
                out = call(self, *args, **kwargs)
                if isinstance(out, (list, tuple)) and type(out) in (list, tuple):
                    return type(out)(readable(o) for o in out)
                return readable(out)
            readable_call._md_readable = True
            cls.__call__ = readable_call

    def forward(self, *args, **kwargs):
        return self.__call__(*args, **kwargs)

    @property
    def name(self) -> str:
        return self._tf_name

    @property
    def name_scope(self) -> name_scopes.name_scope:
        """This module's scope, ``'<outer scopes>/<name>/'``: variables made under ``with self.name_scope:``
        are named ``'<name>/w:0'``, as ``tf.Module``'s (``name_scope.name`` gives the scope)."""
        return name_scopes.name_scope(self._outer_scope + self._tf_name + "/")

    @property
    def variables(self) -> tuple:
        """Every parameter and buffer of this module and its submodules, in ``tf.Module``'s order
        (attributes by name, then submodules: ``module_walk``)."""
        return tuple(module_walk.walk(self, want_modules=False))

    @property
    def trainable_variables(self) -> tuple:
        return tuple(v for v in self.variables if isinstance(v, torch.nn.Parameter) and v.requires_grad)

    @property
    def non_trainable_variables(self) -> tuple:
        return tuple(v for v in self.variables if not (isinstance(v, torch.nn.Parameter) and v.requires_grad))

    @property
    def submodules(self) -> tuple:
        """The modules below this one, in ``tf.Module``'s order."""
        return tuple(module_walk.walk(self, want_modules=True))

    @classmethod
    def with_name_scope(cls, method):
        """Decorate a method to run in the module's ``name_scope`` (``@tf.Module.with_name_scope``)."""
        @functools.wraps(method)
        def in_scope(self, *args, **kwargs):
            with self.name_scope:
                return method(self, *args, **kwargs)
        return in_scope
