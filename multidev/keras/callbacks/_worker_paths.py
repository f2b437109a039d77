"""Chief-only writing under multi-worker strategies, as TensorFlow's ``distributed_file_utils``.

Every worker runs the same saving code (saving may read variables through collectives, which
every worker must join), but only the chief (``strategy.extended.should_checkpoint``) writes to
the requested path; the others write to ``<dir>/workertemp_<worker>/`` and delete it afterwards.
Without a multi-worker strategy every path is used as given.

Example:
    path = write_filepath(model, "ckpt/weights.safetensors")   # chief: as given
    model.save_weights(path)
    remove_temp_dirpath(model, os.path.dirname(path))            # others: delete their copy
"""

from __future__ import annotations

import os
import shutil


def _extended(model):
    return model.distribute_strategy.extended


def is_chief(model) -> bool:
    """Whether this process writes checkpoints, logs and summaries for ``model``'s strategy."""
    return bool(_extended(model).should_checkpoint)


def write_dirpath(model, dirpath: str) -> str:
    """``dirpath`` on the chief; ``dirpath/workertemp_<worker index>`` on every other worker."""
    dirpath = os.fspath(dirpath)
    if is_chief(model):
        return dirpath
    return os.path.join(dirpath, f"workertemp_{_extended(model).worker_index}")


def write_filepath(model, filepath: str) -> str:
    """``filepath`` on the chief; the same file name in this worker's temporary directory elsewhere."""
    filepath = os.fspath(filepath)
    directory, base = os.path.split(filepath)
    return os.path.join(write_dirpath(model, directory), base)


def remove_temp_dirpath(model, dirpath: str) -> None:
    """Delete a temporary directory from ``write_dirpath``/``write_filepath`` (never the chief's)."""
    if not is_chief(model) and os.path.basename(os.path.normpath(dirpath)).startswith("workertemp_"):
        shutil.rmtree(dirpath, ignore_errors=True)
