"""Where Keras keeps its downloaded data sets, and the one error for a file that is not there.

Keras caches downloads under ``$KERAS_HOME/datasets`` (default ``~/.keras/datasets``, or
``/tmp/.keras/datasets`` when the home directory is not writable). multidev reads the same files
and never downloads: a missing file is an error that names the path it looked at, the file Keras
would have downloaded and where to put it.
"""

from __future__ import annotations

import os

KERAS_ORIGIN = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"


def keras_home() -> str:
    """Keras's base directory: ``$KERAS_HOME``, else ``~/.keras`` (``/tmp/.keras`` if home is read-only)."""
    if "KERAS_HOME" in os.environ:
        return os.environ["KERAS_HOME"]
    base = os.path.expanduser("~")
    return os.path.join(base if os.access(base, os.W_OK) else "/tmp", ".keras")


def datasets_dir() -> str:
    """``<keras_home>/datasets``: where Keras's ``get_file`` keeps the data sets."""
    return os.path.join(keras_home(), "datasets")


def missing(what: str, looked_at: list[str], keras_file: str, origin: str, extract: bool = False) -> FileNotFoundError:
    """The error for a data set that is not on disk."""
    where = " or ".join(repr(p) for p in looked_at)
    unpack = " and unpack it" if extract else ""
    return FileNotFoundError(
        f"{what} not found at {where} (multidev never downloads). Download {origin}{unpack} so that it is at "
        f"{os.path.join(datasets_dir(), keras_file)!r} (where Keras's own loader caches it; set KERAS_HOME to use "
        "another cache) or pass path=.")


def resolve_file(path: str | None, keras_name: str, what: str, origin: str) -> str:
    """The file to read: ``path`` if given (absolute, relative to the cwd or to the cache), else the cache's."""
    name = keras_name if path is None else os.fspath(path)
    candidates = [name] if os.path.isabs(name) else [os.path.join(datasets_dir(), name), name]
    for candidate in candidates:
        if os.path.isfile(candidate):
            return candidate
    raise missing(what, candidates, keras_name, origin)


def resolve_dir(path: str | None, keras_dirs: list[str], required: list[str], what: str, origin: str) -> str:
    """The directory holding ``required`` files: ``path`` if given, else the first of Keras's cache layouts."""
    candidates = [os.fspath(path)] if path is not None else [os.path.join(datasets_dir(), d) for d in keras_dirs]
    for candidate in candidates:
        if all(os.path.isfile(os.path.join(candidate, f)) for f in required):
            return candidate
    looked = [os.path.join(c, required[0]) for c in candidates]
    raise missing(what, looked, os.path.join(keras_dirs[0], required[0]), origin, extract=True)
