"""safetensors bytes that carry a SHA-256 checksum in their metadata, verified on load.

The checksum covers the header (tensor names, dtypes, shapes, offsets and the other metadata,
as canonical JSON) and every tensor byte, so a flipped bit anywhere is caught: ``loads`` raises
``md.errors.DataLossError`` (a ValueError) naming the file. ``verify=False`` skips the hash (the
file is still parsed and checked structurally) for speed. Files written without a checksum
(older multidev versions, other tools) load unverified.

Example:
    blob = dumps({"w": torch.ones(2)}, {"format": "x"})
    tensors, metadata = loads(blob, "w.safetensors")
"""

from __future__ import annotations

import hashlib
import json

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from multidev._core.errors import DataLossError

CHECKSUM_KEY = "multidev.sha256"
_MAX_HEADER = 100 * 1024 * 1024


def _cpu_tensors(tensors: dict) -> dict:
    """Detached contiguous CPU tensors, copied where they would share memory (safetensors refuses that)."""
    out, storages = {}, set()
    for key, t in tensors.items():
        t = t.detach().to("cpu").contiguous()
        ptr = t.untyped_storage().data_ptr() if t.numel() else None
        if ptr is not None and ptr in storages:
            t = t.clone()
        elif ptr is not None:
            storages.add(ptr)
        out[key] = t
    return out


def _digest(header: dict, data: memoryview) -> str:
    meta = {k: v for k, v in (header.get("__metadata__") or {}).items() if k != CHECKSUM_KEY}
    canonical = dict(header, __metadata__=meta)
    h = hashlib.sha256(json.dumps(canonical, sort_keys=True, separators=(",", ":")).encode())
    h.update(data)
    return h.hexdigest()


def _split(data: bytes | memoryview) -> tuple[dict, memoryview]:
    """(header dict, data section) of safetensors bytes; ValueError when that is not possible."""
    view = memoryview(data)
    if len(view) < 8:
        raise ValueError(f"only {len(view)} bytes")
    n = int.from_bytes(view[:8], "little")
    if n > min(_MAX_HEADER, len(view) - 8):
        raise ValueError(f"header length {n} exceeds the file")
    header = json.loads(bytes(view[8:8 + n]))
    if not isinstance(header, dict):
        raise ValueError("the header is not a JSON object")
    return header, view[8 + n:]


def dumps(tensors: dict, metadata: dict | None = None) -> bytes:
    """safetensors bytes of ``tensors`` (moved to CPU) with string ``metadata`` and the checksum."""
    # metadata=None when empty: safetensors writes invalid JSON for no tensors with an empty metadata dict
    raw = st_save(_cpu_tensors(tensors),
                  metadata={str(k): str(v) for k, v in (metadata or {}).items()} or None)
    header, data = _split(raw)
    header["__metadata__"] = dict(header.get("__metadata__") or {}, **{CHECKSUM_KEY: _digest(header, data)})
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)   # safetensors aligns the data section to 8 bytes
    return b"".join([len(encoded).to_bytes(8, "little"), encoded, data])


def loads(data: bytes, source: str, verify: bool = True) -> tuple[dict, dict]:
    """(tensors, metadata) from ``dumps`` bytes; damage raises DataLossError naming ``source``.

    ``verify=False`` skips the checksum (faster; bit flips inside tensor data then go unnoticed).
    """
    try:
        header, body = _split(data)
        metadata = dict(header.get("__metadata__") or {})
    except (ValueError, UnicodeDecodeError) as err:
        raise DataLossError(f"Unable to load {source!r}: the file is corrupt, truncated or not a safetensors "
                            f"file ({err}). Nothing was loaded from it.") from err
    expected = metadata.pop(CHECKSUM_KEY, None)
    if verify and expected is not None and _digest(header, body) != expected:
        raise DataLossError(f"Checksum mismatch in {source!r}: the file was damaged after it was written (SHA-256 "
                            "of its contents differs from the one stored in it). Nothing was loaded from it; "
                            "restore it from a good copy (verify_checksum=False would load the damaged data).")
    try:
        tensors = st_load(bytes(data))
    except Exception as err:  # safetensors raises its own error types for every kind of damage
        raise DataLossError(f"Unable to load {source!r}: the file is corrupt, truncated or not a safetensors "
                            f"file ({type(err).__name__}: {err}). Nothing was loaded from it.") from err
    return tensors, metadata


__all__ = ["dumps", "loads", "CHECKSUM_KEY"]
