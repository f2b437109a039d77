"""Crash-safe file and directory writers: a kill at any moment leaves the old version or the new one.

Files: ``atomic_write(path, data)`` writes ``data`` to a temporary file beside ``path``, flushes it
to disk, then ``os.replace``s it over ``path`` (atomic on POSIX) and syncs the directory.

Directories: ``with atomic_directory(path) as tmp:`` gives an empty temporary directory beside
``path``; when the block succeeds the old ``path`` is renamed aside (``<path>.old-<token>``), the
new one renamed to ``path``, then the old one deleted. A kill between the two renames leaves no
``path`` but a complete ``<path>.old-<token>``: ``recover_directory(path)`` (called by readers)
renames it back.

Temporaries are named ``<name>.tmp-<host>-<pid>-<random>`` (``.old-`` for set-aside directories,
``.del-`` for trees being deleted by ``remove_tree``, which renames first so that a kill never leaves
a half-deleted ``path``).
A kill leaves them behind; the next writer in the same directory deletes those of a process that
is gone (same host, pid not alive) or, from another host, older than ``STALE_SECONDS``.
New files and directories get the usual permissions (``0o666``/``0o777`` minus the umask), unlike
``tempfile.mkstemp``'s 0600.

Example:
    atomic_write("/tmp/out.json", b"{}")
    with atomic_directory("/tmp/model") as tmp:
        atomic_write(os.path.join(tmp, "config.json"), b"{}")
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import socket
from collections.abc import Iterable, Iterator

STALE_SECONDS = 24 * 3600   # temporaries of other hosts count as stale after this long
_HOST = re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname()) or "host"
_TOKEN = re.compile(r"\.(tmp|old|del)-(?P<host>[A-Za-z0-9_.]+)-(?P<pid>\d+)-[0-9a-f]{8}$")


def _token() -> str:
    return f"{_HOST}-{os.getpid()}-{secrets.token_hex(4)}"


def temp_name(path: str, kind: str = "tmp") -> str:
    """A fresh temporary name beside ``path`` of our own pattern (``kind``: "tmp", "old" or "del")."""
    path = os.path.abspath(os.fspath(path)).rstrip(os.sep)
    return f"{path}.{kind}-{_token()}"


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:      # e.g. PermissionError: it exists, owned by someone else
        return True
    return True


def _is_stale(entry: str, full: str) -> bool:
    match = _TOKEN.search(entry)
    if match is None:
        return False
    if match["host"] == _HOST:
        return not _pid_alive(int(match["pid"]))
    try:
        import time
        return time.time() - os.lstat(full).st_mtime > STALE_SECONDS
    except OSError:
        return False


def clean_stale(path: str) -> list[str]:
    """Delete our leftover temporaries beside ``path`` (any target in its directory) whose writer is
    gone; returns what was deleted.

    A set-aside ``.old-`` directory is only deleted while its target exists (else it is the
    backup that ``recover_directory`` needs).
    """
    directory = os.path.dirname(os.path.abspath(os.fspath(path)).rstrip(os.sep))
    removed = []
    try:
        entries = os.listdir(directory)
    except OSError:
        return removed
    for entry in entries:
        match = _TOKEN.search(entry)
        if match is None or match.start() == 0:
            continue
        full = os.path.join(directory, entry)
        if match.group(1) == "old" and not os.path.lexists(full[:len(full) - len(match.group(0))]):
            continue
        if _is_stale(entry, full):
            _remove(full)
            removed.append(full)
    return removed


def _remove(full: str) -> None:
    if os.path.isdir(full) and not os.path.islink(full):
        shutil.rmtree(full, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.remove(full)


def _fsync_dir(directory: str) -> None:
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


def atomic_write(path, data: bytes | Iterable[bytes], fsync: bool = True) -> str:
    """Write ``data`` (bytes, or chunks of bytes) to ``path`` atomically; returns ``path``.

    Example:
        atomic_write("weights.safetensors", blob)
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    clean_stale(path)
    tmp = temp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)  # honours umask
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in ([data] if isinstance(data, (bytes, bytearray, memoryview)) else data):
                f.write(chunk)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        if isinstance(err, OSError) and err.filename is None:   # e.g. ENOSPC from write(): say which file
            raise type(err)(err.errno, f"{err.strerror or err} while writing {path!r} (nothing was replaced; the "
                                       f"previous file, if any, is intact)", path) from err
        raise
    if fsync:
        _fsync_dir(directory)
    return path


def atomic_write_text(path, text: str, fsync: bool = True) -> str:
    """``atomic_write`` of UTF-8 text."""
    return atomic_write(path, text.encode("utf-8"), fsync)


def recover_directory(path) -> bool:
    """If ``path`` is missing but a set-aside ``<path>.old-*`` exists (a writer was killed between its
    two renames), rename the newest one back. Returns True when it did."""
    path = os.path.abspath(os.fspath(path)).rstrip(os.sep)
    if os.path.lexists(path):
        return False
    directory, base = os.path.split(path)
    try:
        olds = [e for e in os.listdir(directory) if e.startswith(base + ".old-") and _TOKEN.fullmatch(e[len(base):])]
    except OSError:
        return False
    if not olds:
        return False
    newest = max(olds, key=lambda e: os.lstat(os.path.join(directory, e)).st_mtime)
    try:
        os.rename(os.path.join(directory, newest), path)
    except OSError:
        return os.path.lexists(path)   # another reader recovered it first
    return True


def swap_in(new: str, path: str) -> None:
    """Replace ``path`` (a directory or file, or nothing) with directory ``new``: old aside, new in, old deleted."""
    path = os.path.abspath(os.fspath(path)).rstrip(os.sep)
    old = None
    if os.path.lexists(path):
        old = temp_name(path, "old")
        os.rename(path, old)
    try:
        os.rename(new, path)
    except BaseException:
        if old is not None and not os.path.lexists(path):
            os.rename(old, path)
        raise
    _fsync_dir(os.path.dirname(path))
    if old is not None:
        _remove(old)


def remove_tree(path) -> None:
    """Delete directory (or file) ``path`` so that a kill leaves it whole or gone: rename aside, then delete."""
    path = os.path.abspath(os.fspath(path)).rstrip(os.sep)
    if not os.path.lexists(path):
        return
    aside = temp_name(path, "del")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return
    _remove(aside)


@contextlib.contextmanager
def atomic_directory(path) -> Iterator[str]:
    """Build a directory in a temporary beside ``path``; on success swap it in (see module doc)."""
    path = os.path.abspath(os.fspath(path)).rstrip(os.sep)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    recover_directory(path)
    clean_stale(path)
    tmp = temp_name(path)
    os.mkdir(tmp, 0o777)   # honours umask (tempfile.mkdtemp would make it 0700)
    try:
        yield tmp
        _fsync_dir(tmp)
        swap_in(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


__all__ = ["atomic_write", "atomic_write_text", "atomic_directory", "recover_directory", "swap_in", "remove_tree",
           "clean_stale", "temp_name", "STALE_SECONDS"]
