"""The ``checkpoint`` index file beside numbered checkpoints, in TensorFlow's text format.

    model_checkpoint_path: "ckpt-3"
    all_model_checkpoint_paths: "ckpt-2"
    all_model_checkpoint_paths: "ckpt-3"
    all_model_checkpoint_timestamps: 1700000000.5
    all_model_checkpoint_timestamps: 1700000100.25
    last_preserved_timestamp: 1699999990.0

Paths are written relative to the directory, as TensorFlow writes them (``ckpt-3``, whether the
directory was given as ``./tf_ckpts``, ``ckpt``, ``~/x`` or an absolute path), and returned joined
with the directory as given; so the directory can be moved, copied to another machine or reached
through a symlink. ``~`` is not expanded (TensorFlow's file functions do not expand it either).
The file is replaced atomically.

Example:
    >>> md.train.latest_checkpoint("/tmp/training_checkpoints")   # None before the first save
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os

from multidev._core.atomic_files import atomic_write
from multidev.train import files

STATE_FILE = "checkpoint"
_log = logging.getLogger("multidev.train")


@dataclasses.dataclass
class CheckpointState:
    """What the ``checkpoint`` file records (TF's ``CheckpointState`` proto).

    Example:
        >>> md.train.get_checkpoint_state("/tmp/ckpts").model_checkpoint_path
        '/tmp/ckpts/ckpt-3'
    """

    model_checkpoint_path: str = ""
    all_model_checkpoint_paths: list = dataclasses.field(default_factory=list)
    all_model_checkpoint_timestamps: list = dataclasses.field(default_factory=list)
    last_preserved_timestamp: float = 0.0


_FIELDS = {f.name for f in dataclasses.fields(CheckpointState)}


def _relative(directory: str, path: str) -> str:
    """``path`` relative to ``directory`` (TF: ``os.path.relpath``), lexically: a symlinked
    directory is not resolved, so the record stays valid wherever the directory is reached from."""
    return os.path.relpath(os.path.abspath(os.fspath(path)), os.path.abspath(directory))


def update_checkpoint_state(save_dir, model_checkpoint_path, all_model_checkpoint_paths=None,
                            all_model_checkpoint_timestamps=None, last_preserved_timestamp=None,
                            latest_filename=None) -> None:
    """Atomically (re)write ``save_dir/checkpoint``; the latest path is listed last."""
    save_dir = os.fspath(save_dir)
    paths = [os.fspath(p) for p in (all_model_checkpoint_paths or [])]
    if not paths or paths[-1] != os.fspath(model_checkpoint_path):
        paths = [p for p in paths if p != os.fspath(model_checkpoint_path)] + [os.fspath(model_checkpoint_path)]
    lines = [f"model_checkpoint_path: {json.dumps(_relative(save_dir, model_checkpoint_path))}"]
    lines += [f"all_model_checkpoint_paths: {json.dumps(_relative(save_dir, p))}" for p in paths]
    lines += [f"all_model_checkpoint_timestamps: {float(t)!r}" for t in (all_model_checkpoint_timestamps or [])]
    if last_preserved_timestamp is not None:
        lines.append(f"last_preserved_timestamp: {float(last_preserved_timestamp)!r}")
    atomic_write(os.path.join(save_dir, latest_filename or STATE_FILE), ("\n".join(lines) + "\n").encode())


def get_checkpoint_state(checkpoint_dir, latest_filename=None) -> CheckpointState | None:
    """The parsed ``checkpoint`` file of ``checkpoint_dir`` (paths joined with it), or None if absent.

    Example:
        >>> state = md.train.get_checkpoint_state("/tmp/ckpts")
        >>> state.all_model_checkpoint_paths if state else []
    """
    checkpoint_dir = os.fspath(checkpoint_dir)
    path = os.path.join(checkpoint_dir, latest_filename or STATE_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    state = CheckpointState()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        try:
            parsed = json.loads(value.strip()) if sep else None
        except ValueError:
            parsed = None
        if parsed is None or key.strip() not in _FIELDS:
            raise ValueError(f"Cannot parse line {number} of the checkpoint index {path!r}: {line!r}. Expected "
                             "`model_checkpoint_path: \"...\"` lines as TensorFlow writes; delete or fix the file.")
        _set(state, key.strip(), parsed, checkpoint_dir)
    return state


def _set(state: CheckpointState, key: str, value, directory: str) -> None:
    """One parsed line; a relative path is joined with the directory (an absolute one, as older
    files and TensorFlow's ``save_relative_paths=False`` wrote, is kept)."""
    if key == "model_checkpoint_path":
        state.model_checkpoint_path = os.path.join(directory, value)
    elif key == "all_model_checkpoint_paths":
        state.all_model_checkpoint_paths.append(os.path.join(directory, value))
    elif key == "all_model_checkpoint_timestamps":
        state.all_model_checkpoint_timestamps.append(float(value))
    else:
        state.last_preserved_timestamp = float(value)


def latest_checkpoint(checkpoint_dir, latest_filename=None) -> str | None:
    """The prefix of the newest checkpoint saved in ``checkpoint_dir``, or None.

    Reads the ``checkpoint`` index that ``Checkpoint.save`` and ``CheckpointManager.save`` keep;
    a listed checkpoint whose files are gone gives None (and a logged error), as in TensorFlow.

    Example:
        >>> ckpt.restore(md.train.latest_checkpoint(checkpoint_dir))
    """
    state = get_checkpoint_state(checkpoint_dir, latest_filename)
    if state is None or not state.model_checkpoint_path:
        return None
    if files.exists(state.model_checkpoint_path):
        return state.model_checkpoint_path
    _log.error("Couldn't match files for checkpoint %s", state.model_checkpoint_path)
    return None
