"""Weights files: safetensors, one tensor per variable keyed by its module path.

File naming: a path ending in ``.weights.h5`` (Keras 3's name) or ``.safetensors`` is exactly the
file written or read; a path without any suffix (``"ckpt"``, ``"ckpts/my_checkpoint"``) is a
checkpoint *prefix*, as in Keras 2 (TensorFlow format): an ``md.train`` checkpoint of the model
(its weights, a compiled model's optimizer) at ``<prefix>.index`` + ``<prefix>.data.safetensors``,
listed in the directory's ``checkpoint`` file, readable by ``load_weights`` and by
``md.train.Checkpoint(model).read(prefix)``; any other suffix raises ValueError listing the forms,
as Keras 3 does. (``md.train`` registers that format here at import: keras sits above train.)
The content is safetensors in every case (not HDF5): the names are Keras's, the bytes are never
pickled. Keys are the model's module paths (``layers.0.kernel``,
``layers.3.moving_mean``; attribute names for subclassed models), so a checkpoint loads into a
fresh copy of the same architecture regardless of auto-generated layer names. Loading checks
every name and shape first and changes nothing unless all match (or ``skip_mismatch``).

Integrity: files carry a SHA-256 checksum of their contents (``_core.checked_safetensors``),
verified on load (``verify_checksum=False`` skips it, for speed); damage raises
``md.errors.DataLossError``. Files are written crash-safely (``_core.atomic_files``): a kill
leaves the old file or the new one, and the next save deletes the dead writer's temporary.
"""

from __future__ import annotations

import json
import os
import re
import time

from multidev._core import atomic_files, checked_safetensors
from multidev._core.errors import DataLossError
from multidev._core.user_warnings import warn_user
from multidev.keras import backend

FORMAT = "multidev.keras.weights/1"
_LEGACY_TMP = re.compile(r"\.tmp_[a-z0-9_]{8}\.safetensors")   # temporaries of multidev <= this change
_LEGACY_STALE_SECONDS = 3600
SUFFIX = ".safetensors"


KERAS_SUFFIX = ".weights.h5"
VALID_SUFFIXES = (KERAS_SUFFIX, SUFFIX)


class CheckpointFormat:
    """How a suffix-less path is saved and loaded (``md.train`` provides it: ``register_checkpoint_format``)."""

    def write(self, model, prefix: str) -> None:
        raise NotImplementedError

    def read(self, model, prefix: str):
        raise NotImplementedError


_CHECKPOINT_FORMAT: list[CheckpointFormat] = []


def register_checkpoint_format(fmt: CheckpointFormat) -> None:
    """Install the suffix-less (Keras 2 / TensorFlow checkpoint) format; called by ``multidev.train``."""
    _CHECKPOINT_FORMAT[:] = [fmt]


def is_checkpoint_prefix(filepath) -> bool:
    """A path whose file name has no suffix: Keras 2 saved weights there in TensorFlow's format."""
    path = os.fspath(filepath)
    return isinstance(path, str) and bool(os.path.basename(path)) and not os.path.splitext(os.path.basename(path))[1]


def checkpoint_format() -> CheckpointFormat:
    """The registered format (``import multidev`` imports ``multidev.train``, which registers it)."""
    return _CHECKPOINT_FORMAT[0]


def weights_path(filepath, for_write: bool) -> str:
    """The file ``save_weights``/``load_weights`` use: ``filepath`` itself, which must end in a valid suffix."""
    path = os.fspath(filepath)
    if path.endswith(VALID_SUFFIXES):
        if not for_write and not os.path.isfile(path):
            raise FileNotFoundError(f"Unable to load weights: {path!r} does not exist. Write it with "
                                    "model.save_weights(path) first.")
        return path
    verb = "save_weights" if for_write else "load_weights"
    hint = f"{path + KERAS_SUFFIX!r}" if for_write else f"the file save_weights wrote, e.g. {path + SUFFIX!r}"
    raise ValueError(
        f"The filename must end in `.weights.h5` (Keras 3) or `.safetensors`, or have no suffix at all (a checkpoint "
        f"prefix, as Keras 2 wrote: 'ckpt'). Received: filepath={path!r}. {verb} writes/reads exactly the name given "
        f"(safetensors content either way); pass {hint}."
    )


def variable_dict(model) -> dict:
    """``{module path: tensor}`` of all weights (parameters and persistent buffers), shared ones once."""
    out, seen = {}, set()
    for name, t in model.state_dict(keep_vars=True).items():
        if id(t) not in seen:
            seen.add(id(t))
            out[name] = t
    return out


def to_bytes(tensors: dict, metadata: dict) -> bytes:
    """Serialize tensors + string metadata to safetensors bytes (with a checksum)."""
    return checked_safetensors.dumps(tensors, metadata)


def atomic_write(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` crash-safely (see ``_core.atomic_files``)."""
    atomic_files.atomic_write(path, data)
    _clean_legacy_temps(os.path.dirname(os.path.abspath(path)))


def _clean_legacy_temps(directory: str) -> None:
    """Delete ``.tmp_<8>.safetensors`` files that killed saves of earlier versions left (older than 1 h)."""
    try:
        entries = [e for e in os.listdir(directory) if _LEGACY_TMP.fullmatch(e)]
        for entry in entries:
            full = os.path.join(directory, entry)
            if time.time() - os.stat(full).st_mtime > _LEGACY_STALE_SECONDS:
                os.remove(full)
    except OSError:
        pass


def save_weights(model, filepath, overwrite=True) -> str:
    """Write the model's weights; returns the file (or checkpoint prefix) written."""
    if is_checkpoint_prefix(filepath):
        prefix = os.fspath(filepath)
        if not overwrite and os.path.exists(prefix + ".index"):
            raise FileExistsError(f"A checkpoint already exists at prefix {prefix!r}; pass overwrite=True to replace it.")
        checkpoint_format().write(model, prefix)
        return prefix
    path = weights_path(filepath, for_write=True)
    if not overwrite and os.path.exists(path):
        raise FileExistsError(f"{path!r} already exists; pass overwrite=True to replace it.")
    tensors = variable_dict(model)
    if not tensors:
        raise ValueError(f"Model {model.name!r} has no weights to save yet: build it (call it on data or pass "
                         "input_shape) first.")
    meta = {"format": FORMAT, "model": model.name, "layer_names": json.dumps([l.name for l in model.layers])}
    atomic_write(path, to_bytes(tensors, meta))
    return path


def read_tensors(data: bytes, source: str, verify_checksum: bool = True) -> tuple[dict, dict]:
    """Parse safetensors bytes; damage raises DataLossError (a ValueError) naming ``source``."""
    try:
        return checked_safetensors.loads(data, source, verify=verify_checksum)
    except DataLossError as err:
        raise DataLossError(f"{err} The model's weights were not changed.") from err


def check_and_assign(variables: dict, tensors: dict, source: str, skip_mismatch=False) -> None:
    """Assign ``tensors`` to ``variables`` if every name and shape matches; else list all mismatches."""
    missing = sorted(set(variables) - set(tensors))
    unexpected = sorted(set(tensors) - set(variables))
    shapes = sorted(k for k in set(variables) & set(tensors) if tuple(variables[k].shape) != tuple(tensors[k].shape))
    problems = ([f"  missing from file: {k} (model shape {tuple(variables[k].shape)})" for k in missing]
                + [f"  not in model: {k} (file shape {tuple(tensors[k].shape)})" for k in unexpected]
                + [f"  shape mismatch: {k}: model {tuple(variables[k].shape)} vs file {tuple(tensors[k].shape)}"
                   for k in shapes])
    if problems and not skip_mismatch:
        raise ValueError(f"Cannot load weights from {source!r} into this model; {len(problems)} mismatch(es):\n"
                         + "\n".join(problems) + "\nThe model's weights were not changed. Build the same "
                         "architecture that saved the file (or pass skip_mismatch=True to load what matches).")
    if problems:
        warn_user(f"Skipped {len(problems)} mismatching weight(s) while loading {source!r}:\n" + "\n".join(problems))
    for k, var in variables.items():   # set_value: every replica's copy of a distributed variable
        if k in tensors and k not in shapes:
            backend.set_value(var, tensors[k].to(var.device, var.dtype))


def load_weights(model, filepath, skip_mismatch=False, verify_checksum=True) -> None:
    """Load ``save_weights`` output into ``model`` (all-or-nothing unless ``skip_mismatch``).

    ``verify_checksum=False`` skips the SHA-256 check of the file (faster for very large files).
    Returns the load status for a checkpoint prefix (as Keras 2 does), else None.
    """
    if is_checkpoint_prefix(filepath):
        return checkpoint_format().read(model, os.fspath(filepath))
    path = weights_path(filepath, for_write=False)
    with open(path, "rb") as f:
        data = f.read()
    tensors, _ = read_tensors(data, path, verify_checksum)
    variables = variable_dict(model)
    if not variables:
        raise ValueError(f"Model {model.name!r} has no weights yet, so {path!r} cannot be loaded into it: build the "
                         "model first (call it on a batch, pass input_shape, or model.build(shape)).")
    check_and_assign(variables, tensors, path, skip_mismatch)
