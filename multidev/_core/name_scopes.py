"""``md.name_scope``: TensorFlow's name scopes, which prefix the names of the variables made inside them.

PyTorch names nothing, so a scope matters only for ``md.Variable`` names (``'my_module/w:0'``, as
``tf.Module.name_scope`` gives in TF 2's eager mode, where scopes are not uniquified). The current scope
is one ContextVar: a replica thread or a new thread starts at the top level, as TensorFlow's eager
scopes are per thread.
"""

from __future__ import annotations

import contextvars
import re

_SCOPE: contextvars.ContextVar[str] = contextvars.ContextVar("md_name_scope", default="")
_VALID = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_.\\/>-]*")


def current() -> str:
    """The current scope, ``''`` or ending in ``'/'`` (``'outer/inner/'``)."""
    return _SCOPE.get()


def scoped(name: str | None, default: str) -> str:
    """``name`` (or ``default`` when None) under the current scope."""
    return current() + (name or default)


class name_scope:  # noqa: N801 - TensorFlow's name
    """A context manager that opens ``name`` under the current scope (``name`` ending in ``'/'``: that
    scope itself, as TensorFlow re-enters a captured scope); entering returns the full scope name.

    Example:
        >>> with md.name_scope("outer"):
        ...     md.Variable(1.0, name="v").name
        'outer/v:0'
    """

    def __init__(self, name: str):
        if not isinstance(name, str):
            raise ValueError(f"name for name_scope must be a string, got {name!r} of type {type(name).__name__}.")
        if name and not _VALID.fullmatch(name.rstrip("/") or "."):
            raise ValueError(f"'{name}' is not a valid scope name. A scope name has letters, digits, '_', '.', "
                             "'-' and '/' (not first), e.g. 'dense_1'.")
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
