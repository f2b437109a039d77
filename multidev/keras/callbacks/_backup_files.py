"""On-disk layout of ``BackupAndRestore`` backups, committed atomically and validated on read.

    backup_dir/state.json           {"format", "checkpoint", "files", "resume_epoch", "resume_step",
                                     "pass_taken", "workers", "run": {"epochs", "steps_per_epoch",
                                     "pass_length", "batch_size"}}  <- written last (the commit)
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

``check_against_run`` then checks every counter against the run being resumed (``run`` records the
run that wrote the backup): ``resume_epoch`` <= the run's ``epochs``, ``resume_step`` <= its steps
per epoch, ``pass_taken`` <= the batches of one pass over its input, the same ``steps_per_epoch``,
``pass_length`` and ``batch_size`` as the run that wrote it, and one RNG row per worker. A counter
that does not fit (a damaged or edited file, or other data or batch size) raises DataLossError
naming the file and the field, instead of a ``fit`` that silently trains nothing or the wrong batches.
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
_RUN_FIELDS = ("epochs", "steps_per_epoch", "pass_length", "batch_size")    # each an int >= 0, or null
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
    run = state.get("run", {})
    if not isinstance(run, dict) or any(
            run.get(k) is not None and (isinstance(run[k], bool) or not isinstance(run[k], int) or run[k] < 0)
            for k in _RUN_FIELDS):
        raise damaged(backup_dir, f"{STATE} has run={run!r}, expected {{field: integer >= 0 or null}} for "
                                  f"{list(_RUN_FIELDS)}")
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


def check_against_run(backup_dir: str, state: dict, run: dict, rng_rows: int | None) -> None:
    """DataLossError naming ``state.json`` and the field when a counter of ``state`` does not fit ``run``
    (this fit's ``epochs``, ``steps_per_epoch``, ``pass_length``, ``batch_size``; None: unknown)."""
    path = os.path.join(backup_dir, STATE)

    def refuse(field, value, why):
        raise damaged(backup_dir, f"{path!r} field {field!r} = {value!r} does not fit the run being resumed: {why}")

    if run.get("epochs") is not None and state["resume_epoch"] > run["epochs"]:
        refuse("resume_epoch", state["resume_epoch"], f"this fit trains {run['epochs']} epoch(s)")
    if run.get("epochs") is not None and state["resume_epoch"] == run["epochs"] and state["resume_step"] > 0:
        refuse("resume_step", state["resume_step"], f"resume_epoch={state['resume_epoch']} is past the last epoch")
    steps = run.get("steps_per_epoch")
    if steps is not None and state["resume_step"] > steps:
        refuse("resume_step", state["resume_step"], f"an epoch of this fit has {steps} step(s)")
    pass_length = run.get("pass_length")
    if pass_length is not None and state["pass_taken"] > pass_length:
        refuse("pass_taken", state["pass_taken"], f"one pass over this fit's input has {pass_length} batch(es)")
    recorded = state.get("run", {})
    for field in ("batch_size", "steps_per_epoch", "pass_length"):
        if recorded.get(field) is not None and run.get(field) is not None and recorded[field] != run[field]:
            refuse(f"run.{field}", recorded[field], f"this fit has {field}={run[field]!r} (resume with the same data, "
                                                   "batch size and steps_per_epoch as the interrupted fit)")
    if rng_rows is not None and rng_rows != state["workers"]:
        refuse("workers", state["workers"], f"its rng file holds the RNG states of {rng_rows} worker(s)")


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
