"""A checkpoint or SavedModel that cannot be written raises TensorFlow's error for the cause (a path
under a file: ``FailedPreconditionError``; no permission: ``PermissionDeniedError``; a full disk:
``ResourceExhaustedError``), naming the path and the fix, instead of a bare ``OSError``.

The raised error is also an ``OSError`` with the original ``errno`` and ``filename``, so programs
written against PyTorch's or Python's file errors keep catching it.
"""

from __future__ import annotations

import contextlib
import errno
import functools
from typing import Iterator

from multidev._core.errors import FailedPreconditionError, OpError, PermissionDeniedError, ResourceExhaustedError

_BY_ERRNO = {
    errno.ENOTDIR: (FailedPreconditionError, "a part of the path is a file, not a directory"),
    errno.EEXIST: (FailedPreconditionError, "a part of the path is a file, not a directory"),
    errno.EISDIR: (FailedPreconditionError, "the path names a directory"),
    errno.EACCES: (PermissionDeniedError, "this process may not write there"),
    errno.EPERM: (PermissionDeniedError, "this process may not write there"),
    errno.EROFS: (PermissionDeniedError, "the file system is read-only"),
    errno.ENOSPC: (ResourceExhaustedError, "the disk is full"),
}


@functools.cache
def _as_os_error(tf_type: type) -> type:
    """``tf_type`` that is an ``OSError`` too (one class per TensorFlow type)."""
    return type(tf_type.__name__, (tf_type, OSError), {"__module__": tf_type.__module__,
                                                      "__str__": lambda self: str(self.args[0])})


_WRITE_HINT = ("Pass a prefix in a writable directory, e.g. './ckpts/ckpt'; nothing was written there and the "
               "checkpoint's save_counter is unchanged.")


@contextlib.contextmanager
def writing(path: str, action: str = "write the checkpoint", hint: str = _WRITE_HINT) -> Iterator[None]:
    """Turn an ``OSError`` raised while ``action`` on ``path`` into TensorFlow's error for its cause."""
    try:
        yield
    except OpError:
        raise
    except OSError as err:
        if err.errno not in _BY_ERRNO:
            raise                      # another cause (an injected crash, EIO): the original error says it
        tf_type, cause = _BY_ERRNO[err.errno]
        error = _as_os_error(tf_type)(f"Failed to {action} {path!r}: {cause} ({err.filename or path!r}: "
                                      f"{err.strerror or err}). {hint}")
        error.errno, error.filename = err.errno, err.filename
        raise error from err
