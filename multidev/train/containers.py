"""Lists, dicts and tuples assigned to a ``Checkpoint``: TensorFlow's ``ListWrapper``/``DictWrapper``.

TensorFlow's checkpoint guide ("Object tracking") assigns ``save.listed = [tf.Variable(1.)]`` and
``save.mapped = {'one': ...}``: the container is wrapped, each trackable element is a child named
by its index (``listed/0``) or key (``mapped/one``), other elements (numbers, strings) are ignored,
and a value saved for an element not there yet waits for it (``restore.listed = []`` then
``restore.listed.append(v1)`` restores ``v1``). As in TensorFlow, a list whose trackable elements
were replaced, deleted or moved cannot be saved (restoration by position would be wrong), and a
dict mapping a non-string key to a trackable cannot either.

Example:
    >>> save = md.train.Checkpoint()
    >>> save.listed = [md.Variable(1.)]
    >>> save.listed.append(md.Variable(2.))
    >>> save.listed
    ListWrapper([<md.Variable ...>, <md.Variable ...>])
"""

from __future__ import annotations

_NOT_APPEND_ONLY = (
    "Unable to save the object {obj!r} (a list wrapper constructed to track trackable objects). A list element "
    "was replaced (__setitem__, __setslice__), deleted (__delitem__, __delslice__), or moved (sort). In order to "
    "support restoration on object creation, tracking is exclusively for append-only data structures.\n\nIf you "
    "don't need this list checkpointed, wrap it in a non-trackable object; it will be subsequently ignored.")
_NON_STRING_KEY = (
    "Unable to save the object {obj!r} (a dictionary wrapper constructed automatically on attribute assignment). "
    "The wrapped dictionary contains a non-string key which maps to a trackable object or mutable data "
    "structure.\n\nIf you don't need this dictionary checkpointed, wrap it in a non-trackable object; it will be "
    "subsequently ignored.")


def wrap(value):
    """``value`` with its lists, dicts and tuples (nested ones too) replaced by tracking wrappers."""
    if isinstance(value, _Wrapper):
        return value
    if isinstance(value, list):
        return ListWrapper(value)
    if isinstance(value, dict):
        return DictWrapper(value)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):    # (namedtuples stay as they are)
        return TupleWrapper(value)
    return value


def _is_trackable(value) -> bool:
    from multidev.train.trackables import kind_of
    return kind_of(value) is not None


class _Wrapper:
    """Shared by the wrappers: values waiting for a child (``_defer_child``), handed over on insertion."""

    def _pending(self) -> dict:
        if "_md_pending" not in self.__dict__:
            self.__dict__["_md_pending"] = {}
        return self.__dict__["_md_pending"]

    def _defer_child(self, name: str, restore_fn) -> None:
        self._pending()[name] = restore_fn

    def _arrived(self, name: str, value) -> None:
        pending = self._pending().pop(name, None)
        if pending is not None and _is_trackable(value):
            pending(value)


class ListWrapper(_Wrapper, list):
    """A list that tracks its trackable elements by position (TensorFlow's ``ListWrapper``).

    Example:
        >>> ckpt = md.train.Checkpoint(listed=[md.Variable(1.0)])
        >>> ckpt.listed.append(md.Variable(2.0))        # saved as listed/0, listed/1
    """

    def __init__(self, values=()):
        list.__init__(self, (wrap(v) for v in values))
        self.__dict__["_md_moved"] = False

    def _note_removed(self, values) -> None:
        if any(_is_trackable(v) for v in values):
            self.__dict__["_md_moved"] = True

    def _trackable_children(self) -> dict:
        if self.__dict__.get("_md_moved"):
            raise ValueError(_NOT_APPEND_ONLY.format(obj=self))
        return {str(i): v for i, v in enumerate(self) if _is_trackable(v)}

    def append(self, value) -> None:
        list.append(self, wrap(value))
        self._arrived(str(len(self) - 1), self[-1])

    def extend(self, values) -> None:
        for value in values:
            self.append(value)

    def __iadd__(self, values):
        self.extend(values)
        return self

    def __setitem__(self, index, value) -> None:
        old = self[index]
        self._note_removed(old if isinstance(index, slice) else [old])
        list.__setitem__(self, index, [wrap(v) for v in value] if isinstance(index, slice) else wrap(value))

    def __delitem__(self, index) -> None:
        old = self[index]
        self._note_removed(old if isinstance(index, slice) else [old])
        list.__delitem__(self, index)

    def insert(self, index, value) -> None:
        if index < len(self):
            self._note_removed(self[index:])
        list.insert(self, index, wrap(value))

    def pop(self, index=-1):
        self._note_removed([self[index]])
        return list.pop(self, index)

    def remove(self, value) -> None:
        self._note_removed([value])
        list.remove(self, value)

    def clear(self) -> None:
        self._note_removed(list(self))
        list.clear(self)

    def sort(self, *args, **kwargs) -> None:
        self._note_removed(list(self))
        list.sort(self, *args, **kwargs)

    def reverse(self) -> None:
        self._note_removed(list(self))
        list.reverse(self)

    def __imul__(self, n):
        if n < 1:
            self.clear()
        else:
            self.extend(list(self) * (n - 1))
        return self

    def __repr__(self) -> str:
        return f"ListWrapper({list.__repr__(self)})"


class DictWrapper(_Wrapper, dict):
    """A dict that tracks its trackable values by key (TensorFlow's ``DictWrapper``).

    Example:
        >>> ckpt = md.train.Checkpoint(mapped={"one": md.Variable(1.0)})   # saved as mapped/one
    """

    def __init__(self, *args, **kwargs):
        dict.__init__(self)
        self.update(*args, **kwargs)

    def _trackable_children(self) -> dict:
        if any(not isinstance(k, str) and _is_trackable(v) for k, v in self.items()):
            raise ValueError(_NON_STRING_KEY.format(obj=dict(self)))
        return {k: v for k, v in self.items() if _is_trackable(v)}

    def __setitem__(self, key, value) -> None:
        dict.__setitem__(self, key, wrap(value))
        if isinstance(key, str):
            self._arrived(key, self[key])

    def update(self, *args, **kwargs) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def __repr__(self) -> str:
        return f"DictWrapper({dict.__repr__(self)})"

    def __str__(self) -> str:          # (TensorFlow's prints as the plain dict)
        return dict.__repr__(self)


class TupleWrapper(_Wrapper, tuple):
    """A tuple that tracks its trackable elements by position (immutable: nothing arrives later).

    Example:
        >>> ckpt = md.train.Checkpoint(pair=(md.Variable(1.0), md.Variable(2.0)))   # pair/0, pair/1
    """

    def __new__(cls, values=()):
        return tuple.__new__(cls, (wrap(v) for v in values))

    def _trackable_children(self) -> dict:
        return {str(i): v for i, v in enumerate(self) if _is_trackable(v)}
