"""One checkpoint on disk: ``<prefix>.index`` (JSON object graph) + ``<prefix>.data.safetensors``.

    prefix.data.safetensors   every saved tensor (one canonical copy of each variable), no pickle
    prefix.index              {"format", "data": {"file", "sha256", "size"}, "objects": {...},
                               "index_sha256"}

The data file is written first and the index last, each through a temporary file renamed over
the target, so a save killed at any point leaves every earlier checkpoint readable; the index
records the data file's SHA-256, so an index that does not belong to the data beside it (a
``write`` to the same prefix killed between the two renames) is reported, never half-loaded.
The index checksums itself too (``index_sha256``: the SHA-256 of its other fields in canonical
JSON): a damaged name in the object graph would otherwise leave variables or optimizer slots at
fresh values while the restore returns normally. Indexes of format 1 (before that checksum) are
still read.

Example:
    write("/tmp/ckpt/ckpt-1", {"objects": {...}}, {"model:kernel": torch.ones(2)})
    graph, tensors = read("/tmp/ckpt/ckpt-1")
"""

from __future__ import annotations

import hashlib
import json
import os

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from multidev._core.errors import DataLossError, NotFoundError
from multidev._core.atomic_files import atomic_write

FORMAT = "multidev.train.checkpoint/2"
_FORMATS_READ = (FORMAT, "multidev.train.checkpoint/1")     # 1: no index_sha256
INDEX_SUFFIX = ".index"
DATA_SUFFIX = ".data.safetensors"


def index_path(prefix: str) -> str:
    return os.fspath(prefix) + INDEX_SUFFIX


def data_path(prefix: str) -> str:
    return os.fspath(prefix) + DATA_SUFFIX


def exists(prefix: str) -> bool:
    """Whether a checkpoint was committed at ``prefix`` (its index file exists)."""
    return os.path.isfile(index_path(prefix))


def write(prefix: str, graph: dict, tensors: dict[str, torch.Tensor]) -> None:
    """Commit one checkpoint: the tensors, then the index naming them."""
    prefix = os.fspath(prefix)
    data = st_save({k: t.detach().to("cpu").contiguous() for k, t in tensors.items()},
                   metadata={"format": FORMAT})
    atomic_write(data_path(prefix), data)
    index = dict(graph, format=FORMAT, data={"file": os.path.basename(data_path(prefix)),
                                             "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)})
    index["index_sha256"] = _index_checksum(index)
    atomic_write(index_path(prefix), json.dumps(index, indent=1, sort_keys=True).encode())


def _index_checksum(index: dict) -> str:
    """SHA-256 of the index's fields but its own checksum, as canonical JSON (parsing and dumping
    again gives the same bytes, so the check needs no copy of the file's exact layout)."""
    body = {k: v for k, v in index.items() if k != "index_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def read(prefix: str) -> tuple[dict, dict[str, torch.Tensor]]:
    """The object graph and tensors of the checkpoint at ``prefix``."""
    prefix = os.fspath(prefix)
    if not exists(prefix):
        stem = next((prefix[:-len(sfx)] for sfx in (INDEX_SUFFIX, DATA_SUFFIX) if prefix.endswith(sfx)), None)
        hint = (f"Pass the prefix {stem!r}, without the file suffix." if stem and exists(stem) else
                "Pass the prefix that Checkpoint.save/write returned (e.g. 'ckpt/ckpt-3', without a file suffix), "
                "or use md.train.latest_checkpoint(directory).")
        raise NotFoundError(f"Failed to restore from checkpoint {prefix!r}: {index_path(prefix)!r} does not exist. "
                            + hint)
    _refuse_tensorflow_checkpoint(prefix)
    try:
        with open(index_path(prefix), encoding="utf-8") as f:
            graph = json.load(f)
        with open(data_path(prefix), "rb") as f:
            data = f.read()
    except (OSError, ValueError) as err:
        raise DataLossError(f"Checkpoint {prefix!r} is unreadable ({type(err).__name__}: {err}).") from err
    _check_index(prefix, graph)
    if hashlib.sha256(data).hexdigest() != graph["data"]["sha256"]:
        raise DataLossError(f"Checkpoint {prefix!r} is inconsistent: {data_path(prefix)!r} does not match the "
                            "checksum its index records (a write to this prefix was interrupted, or the file "
                            "was changed). Restore an earlier checkpoint.")
    return graph, st_load(data)


def _refuse_tensorflow_checkpoint(prefix: str) -> None:
    """A checkpoint TensorFlow wrote (its binary index beside ``<prefix>.data-00000-of-0000N``, found
    through the ``checkpoint`` file both write) is refused by name, not as damaged data."""
    directory, base = os.path.split(prefix)
    shards = [n for n in os.listdir(directory or ".") if n.startswith(base + ".data-") and "-of-" in n]
    if shards and not os.path.exists(data_path(prefix)):
        raise DataLossError(f"Checkpoint {prefix!r} was written by TensorFlow (its files: {base}.index, "
                            f"{sorted(shards)[0]}); multidev reads only its own checkpoints (safetensors + JSON). "
                            "Load it with TensorFlow and save the values again with md.train.Checkpoint.")


def _check_index(prefix: str, graph) -> None:
    """DataLossError unless ``graph`` is an intact multidev index (its format, its own checksum)."""
    fmt = graph.get("format") if isinstance(graph, dict) else None
    if fmt not in _FORMATS_READ:
        raise DataLossError(f"{index_path(prefix)!r} is not a multidev checkpoint index (format {fmt!r}, expected "
                            f"{FORMAT!r}).")
    if fmt == FORMAT and graph.get("index_sha256") != _index_checksum(graph):
        raise DataLossError(f"Checkpoint {prefix!r} is damaged: {index_path(prefix)!r} does not match the checksum "
                            "it records (the file was changed or corrupted after it was written), so its object "
                            "graph cannot be trusted and nothing was restored. Restore an earlier checkpoint.")
    if not isinstance(graph.get("data"), dict) or not isinstance(graph.get("objects"), dict):
        raise DataLossError(f"{index_path(prefix)!r} lacks its 'data' or 'objects' entry; nothing was restored.")


def remove(prefix: str) -> None:
    """Delete a checkpoint's files (index first, so a half-deleted one is never listed as present)."""
    for path in (index_path(prefix), data_path(prefix)):
        if os.path.exists(path):
            os.remove(path)
