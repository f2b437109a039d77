"""Crash-safe file writes for checkpoints: a temporary file in the same directory, then ``os.replace``.

A process killed at any moment leaves either the old file or the new one, never a torn file
(``os.replace`` is atomic on POSIX and Windows within one filesystem). A small private helper:
the checkpoint files only need this one operation.

Example:
    write_atomic("/tmp/ckpt/checkpoint", b'model_checkpoint_path: "ckpt-1"\\n')
"""

from __future__ import annotations

import os
import tempfile


def write_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` through a synced temporary file renamed over it."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp_" + os.path.basename(path) + ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    _sync_directory(directory)


def _sync_directory(directory: str) -> None:
    """Persist the rename itself (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
