"""``tf.io.gfile`` on local paths: what the multi-worker tutorials' ``write_filepath`` helpers call.

The tutorials make a per-worker temporary directory with ``tf.io.gfile.makedirs`` and delete it with
``tf.io.gfile.rmtree`` after a non-chief worker's save; TF raises ``NotFoundError`` for a missing
path, as these do. Only the local file system (no ``gs://``); other schemes raise with a hint.
"""

from __future__ import annotations

import glob as _glob
import os
import shutil

from multidev._core import errors

__all__ = ["exists", "glob", "isdir", "listdir", "makedirs", "mkdir", "remove", "rmtree"]


def _local(path) -> str:
    path = os.fspath(path)
    if "://" in path and not path.startswith("file://"):
        raise errors.UnimplementedError(
            f"md.io.gfile handles local paths only, got {path!r}; copy the files locally first.")
    return path[len("file://"):] if path.startswith("file://") else path


def _not_found(message: str) -> errors.NotFoundError:
    """TF's messages, per function (its C++ file system's wording)."""
    return errors.NotFoundError(message)


def exists(path) -> bool:
    return os.path.exists(_local(path))


def isdir(path) -> bool:
    return os.path.isdir(_local(path))


def listdir(path) -> list[str]:
    path = _local(path)
    if not os.path.isdir(path):
        raise _not_found(f"Could not find directory {path}")
    return os.listdir(path)


def glob(pattern) -> list[str]:
    return sorted(_glob.glob(_local(pattern)))


def makedirs(path) -> None:
    """Creates ``path`` and its parents; no error when it exists (TF's ``recursive_create_dir``)."""
    os.makedirs(_local(path), exist_ok=True)


def mkdir(path) -> None:
    os.mkdir(_local(path))


def remove(path) -> None:
    path = _local(path)
    if not os.path.isfile(path) and not os.path.islink(path):
        raise _not_found(f"{path}; No such file or directory")
    os.remove(path)


def rmtree(path) -> None:
    """Deletes the directory ``path`` and everything under it; ``NotFoundError`` when it is missing."""
    path = _local(path)
    if not os.path.isdir(path):
        raise _not_found(f"{path} not found")
    shutil.rmtree(path)
