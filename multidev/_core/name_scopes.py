"""``md.name_scope``: TensorFlow's name scopes, which prefix the names of the variables made inside them.

PyTorch names nothing, so a scope matters only for ``md.Variable`` names (``'my_module/w:0'``, as
``tf.Module.name_scope`` gives in TF 2's eager mode, where scopes are not uniquified). The current scope
is one ContextVar (per thread, as TensorFlow's eager scopes).
"""

from __future__ import annotations

import contextvars

_SCOPE: contextvars.ContextVar[str] = contextvars.ContextVar("md_name_scope", default="")


def current() -> str:
    """The current scope, ``''`` or ending in ``'/'`` (``'outer/inner/'``)."""
    return _SCOPE.get()


def scoped(name: str | None, default: str) -> str:
    """``name`` (or ``default`` when None) under the current scope."""
    return current() + (name or default)


class name_scope:  # noqa: N801 - TensorFlow's name
    """A context manager that opens ``name`` under the current scope (``name`` ending in ``'/'``: that
    scope itself, as TensorFlow re-enters a captured scope; ``''``: the top level); entering returns the
    full scope name. As in TensorFlow's eager mode, any string is a name.

    Example:
        >>> with md.name_scope("outer"):
        ...     md.Variable(1.0, name="v").name
        'outer/v:0'
    """

    def __init__(self, name: str):
        if not isinstance(name, str):
            raise ValueError(f"name for name_scope must be a string, got {name!r} of type {type(name).__name__}.")
        self._name = name
        self._tokens: list = []

    @property
    def name(self) -> str:
        return self._name

    def __enter__(self) -> str:
        full = self._name if self._name.endswith("/") or not self._name else current() + self._name + "/"
        self._tokens.append(_SCOPE.set(full))
        return full

    def __exit__(self, *exc) -> None:
        _SCOPE.reset(self._tokens.pop())
