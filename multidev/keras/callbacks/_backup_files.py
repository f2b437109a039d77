"""On-disk layout of ``BackupAndRestore`` backups, committed atomically and validated on read.

    backup_dir/state.json           {"format", "checkpoint", "files", "resume_epoch", "resume_step",
                                     "pass_taken", "workers"}        <- written last (the commit)
    backup_dir/ckpt-<n>/weights.safetensors     model weights (module paths, as save_weights)
    backup_dir/ckpt-<n>/optimizer.safetensors   ``iterations`` and slots (as model.save)
    backup_dir/ckpt-<n>/rng.safetensors         "pass": RNG state at the start of the input pass;
                                                "workers": every worker's RNG state at the backup

A backup's files go to a fresh ``ckpt-<n>`` directory (built under a temporary name and renamed:
``_core.atomic_files``); ``state.json`` is then replaced atomically to point at it, and older
directories are deleted. A crash at any moment leaves either the previous backup or the new one,
never a mix. Nothing is pickled; every file carries a checksum.

Reading validates everything before anything is restored: a damaged ``state.json``, a
``checkpoint`` entry other than ``ckpt-<n>`` (nothing outside ``backup_dir`` is ever read), a
missing directory or file, a damaged file or missing tensors raise ``md.errors.DataLossError``
naming the problem and the fix (delete ``backup_dir``): resuming without the optimizer or RNG
state would not continue the training exactly, so it is never done silently.
A ``state.json`` of the single-file format 1 (``{"epoch": n}`` beside the files) is still read.
"""

from __future__ import annotations

import json
import os
import re
import warnings

import torch

from multidev._core import atomic_files
from multidev._core.errors import DataLossError
from multidev.keras.saving import weights_io

FORMAT = "multidev.keras.backup/2"
STATE = "state.json"
FILES = ("weights", "optimizer", "rng")
_CKPT = re.compile(r"ckpt-(\d{1,18})")
_COUNTERS = ("resume_epoch", "resume_step", "pass_taken", "workers")
_RNG_KEYS = ("pass", "workers")


def _file(directory: str, name: str) -> str:
    return os.path.join(directory, f"{name}.safetensors")


def damaged(backup_dir: str, problem: str) -> DataLossError:
    """The error for a backup that cannot be resumed exactly: the problem, then the fix."""
    return DataLossError(f"The backup in backup_dir={backup_dir!r} cannot be resumed exactly: {problem}. Delete "
                         f"{backup_dir!r} to start the training from scratch (or put back an intact copy of it).")


def _counter(backup_dir: str, state: dict, key: str) -> int:
    value = state.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise damaged(backup_dir, f"{STATE} has {key}={value!r}, expected an integer >= 0")
    return value


def read_state(backup_dir: str) -> dict | None:
    """The committed, validated state (with ``"dir"``: where its files are), or None when there is no backup."""
    path = os.path.join(backup_dir, STATE)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
    except (OSError, ValueError) as err:
        raise damaged(backup_dir, f"cannot read {path!r} ({err})") from err
    if not isinstance(state, dict):
        raise damaged(backup_dir, f"{STATE} holds {state!r}, expected a JSON object")
    if "checkpoint" not in state and set(state) == {"epoch"}:   # format 1: files beside it
        epoch = _counter(backup_dir, state, "epoch")
        return {"resume_epoch": epoch + 1, "resume_step": 0, "pass_taken": 0, "workers": 1, "dir": backup_dir,
                "format": 1, "files": ["weights"]}
    if state.get("format") != FORMAT:
        raise damaged(backup_dir, f"{STATE} has format {state.get('format')!r}, expected {FORMAT!r}")
    checkpoint = state.get("checkpoint")
    if not isinstance(checkpoint, str) or not _CKPT.fullmatch(checkpoint):
        raise damaged(backup_dir, f"{STATE} names checkpoint {checkpoint!r}, expected 'ckpt-<n>' inside backup_dir")
    for key in _COUNTERS:
        _counter(backup_dir, state, key)
    listed = state.get("files", list(FILES))
    if not isinstance(listed, list) or not set(listed) <= set(FILES) or "weights" not in listed:
        raise damaged(backup_dir, f"{STATE} lists files {listed!r}, expected some of {list(FILES)} with 'weights'")
    directory = os.path.join(backup_dir, checkpoint)
    if not os.path.isdir(directory) or os.path.islink(directory):
        raise damaged(backup_dir, f"the checkpoint directory {directory!r} named by {STATE} is missing")
    return dict(state, dir=directory, files=listed)


def read_files(state: dict, backup_dir: str, needs_optimizer: bool) -> dict[str, dict | None]:
    """Every file of the backup, validated: ``{"weights": tensors, "optimizer": ..., "rng": ...}``.

    A file the backup should have (the optimizer's when ``needs_optimizer``) but lacks raises.
    Format-1 backups never had the RNG file: they resume at the epoch boundary with the current
    RNG state, and a warning says so.
    """
    wanted = set(FILES) if state.get("format") != 1 else {"weights", "optimizer"}
    if not needs_optimizer and "optimizer" not in state["files"]:
        wanted.discard("optimizer")
    out: dict[str, dict | None] = {name: None for name in FILES}
    for name in FILES:
        path = _file(state["dir"], name)
        if not os.path.isfile(path):
            if name in wanted:
                raise damaged(backup_dir, f"its {name} file {path!r} is missing")
            continue
        with open(path, "rb") as f:
            data = f.read()
        try:
            out[name], _ = weights_io.read_tensors(data, path)
        except ValueError as err:
            raise damaged(backup_dir, str(err).split(" Nothing was loaded")[0].rstrip(".")) from err
    if out["rng"] is not None:
        _check_rng(backup_dir, out["rng"])
    elif state.get("format") == 1:
        warnings.warn(f"The backup in {backup_dir!r} has the older format 1, without RNG state: training resumes "
                      "at the next epoch with the current RNG state (shuffling and dropout differ from an "
                      "uninterrupted run).")
    return out


def _check_rng(backup_dir: str, rng: dict) -> None:
    missing = [k for k in _RNG_KEYS if k not in rng]
    if missing:
        raise damaged(backup_dir, f"its rng file lacks {missing}")
    shapes = {k: tuple(rng[k].shape) for k in _RNG_KEYS}
    if len(shapes["pass"]) != 1 or len(shapes["workers"]) != 2 or shapes["workers"][0] < 1:
        raise damaged(backup_dir, f"its rng file has shapes {shapes}, expected 'pass' 1-D and 'workers' 2-D")
    expected = torch.get_rng_state()   # torch's CPU generator state: uint8, of one fixed length
    for key in _RNG_KEYS:
        if rng[key].dtype != expected.dtype or rng[key].shape[-1] != expected.numel():
            raise damaged(backup_dir, f"its rng file's {key!r} is {rng[key].dtype} of shape {tuple(rng[key].shape)}, "
                                      f"not a torch RNG state ({expected.dtype}, {expected.numel()} bytes per row)")


def _next_number(backup_dir: str, previous: dict | None) -> int:
    numbers = [int(m.group(1)) for entry in os.listdir(backup_dir) if (m := _CKPT.fullmatch(entry))]
    if previous and isinstance(previous.get("checkpoint"), str) and _CKPT.fullmatch(previous["checkpoint"]):
        numbers.append(int(previous["checkpoint"][5:]))
    return max(numbers, default=0) + 1


def _raw_state(backup_dir: str) -> dict | None:
    try:
        with open(os.path.join(backup_dir, STATE), encoding="utf-8") as f:
            state = json.load(f)
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def write(backup_dir: str, blobs: dict[str, bytes], state: dict) -> None:
    """Commit a backup: ``blobs`` (name -> safetensors bytes) into a fresh directory, then the state."""
    os.makedirs(backup_dir, exist_ok=True)
    atomic_files.clean_stale(backup_dir)    # e.g. a backup_dir whose deletion was killed
    name = f"ckpt-{_next_number(backup_dir, _raw_state(backup_dir))}"
    with atomic_files.atomic_directory(os.path.join(backup_dir, name)) as tmp:
        for key, data in blobs.items():
            atomic_files.atomic_write(_file(tmp, key), data)
    committed = dict(state, format=FORMAT, checkpoint=name, files=sorted(blobs))
    atomic_files.atomic_write_text(os.path.join(backup_dir, STATE), json.dumps(committed))
    for entry in os.listdir(backup_dir):
        if _CKPT.fullmatch(entry) and entry != name:
            atomic_files.remove_tree(os.path.join(backup_dir, entry))
    for key in FILES:   # format-1 files, superseded
        if os.path.exists(_file(backup_dir, key)):
            os.remove(_file(backup_dir, key))
