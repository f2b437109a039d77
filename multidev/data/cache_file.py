"""``Dataset.cache(filename)`` files: safetensors for the tensors, JSON for the structure, no pickle.

``<filename>.mdcache.safetensors`` holds, per leaf position of the (flattened) elements, either one
stacked tensor (``leaf<j>``: every element's leaf has the same dtype and shape), one tensor per
element (``leaf<j>/<i>``), or, for strings, a UTF-8 JSON list (``leaf<j>``, a uint8 tensor). Its
metadata (``multidev.cache``, JSON) holds the format, the pipeline fingerprint (the key), the
element count, the element structure and each leaf position's kind. The file carries a checksum
(``_core.checked_safetensors``) and is written atomically (``_core.atomic_files``): a kill while
writing leaves no cache (or the previous one), never half of one.

Example:
    write(path, elements, key)
    elements = read(path, key)      # None: written by another pipeline (or absent)
"""

from __future__ import annotations

import base64
import collections
import json
import os
from typing import Any

import numpy as np
import torch

from multidev._core import atomic_files, checked_safetensors
from multidev._core.errors import DataLossError
from multidev.data import structure

FORMAT = "multidev.data.cache/1"
SUFFIX = ".mdcache.safetensors"
_META = "multidev.cache"


def cache_path(filename: str) -> str:
    """The file ``cache(filename)`` writes."""
    return filename + SUFFIX


# ----- structure <-> JSON ------------------------------------------------------------------------
def _template(element: Any) -> Any:
    if isinstance(element, tuple):
        items = [_template(v) for v in element]
        if structure._is_namedtuple(element):
            return {"namedtuple": type(element).__name__, "fields": list(element._fields), "items": items}
        return {"tuple": items}
    if isinstance(element, dict):
        return {"dict": [[k, _template(element[k])] for k in element]}
    return None


def _rebuild(template: Any, leaves) -> Any:
    if template is None:
        return next(leaves)
    if "tuple" in template:
        return tuple(_rebuild(t, leaves) for t in template["tuple"])
    if "namedtuple" in template:
        cls = collections.namedtuple(template["namedtuple"], template["fields"])
        return cls(*(_rebuild(t, leaves) for t in template["items"]))
    pairs = template["dict"]
    flat = {k: t for k, t in pairs}
    packed = {k: _rebuild(flat[k], leaves) for k in sorted(flat)}    # flatten's order: sorted keys
    return {k: packed[k] for k, _ in pairs}


# ----- leaves ------------------------------------------------------------------------------------
def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"b64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, np.ndarray):
        return {"array": [_json_value(v) for v in value.reshape(-1).tolist()], "shape": list(value.shape)}
    return value


def _from_json(value: Any) -> Any:
    if isinstance(value, dict) and "b64" in value:
        return base64.b64decode(value["b64"])
    if isinstance(value, dict) and "array" in value:
        items = [_from_json(v) for v in value["array"]]
        out = np.empty(len(items), dtype=object)
        out[:] = items
        return out.reshape(value["shape"])
    return value


def _encode_leaf(j: int, column: list, tensors: dict) -> str:
    if all(isinstance(v, torch.Tensor) for v in column):
        first = column[0]
        if all(v.dtype == first.dtype and v.shape == first.shape for v in column):
            tensors[f"leaf{j}"] = torch.stack([v.detach().cpu() for v in column])
            return "stacked"
        for i, v in enumerate(column):
            tensors[f"leaf{j}/{i}"] = v.detach().cpu()
        return "split"
    if all(isinstance(v, (str, bytes, np.ndarray)) and not isinstance(v, torch.Tensor) for v in column):
        data = json.dumps([_json_value(v) for v in column]).encode("utf-8")
        tensors[f"leaf{j}"] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        return "json"
    kinds = sorted({type(v).__name__ for v in column})
    raise TypeError(f"cache(filename) cannot store elements with components of types {kinds} at position {j}.")


def _decode_leaf(j: int, kind: str, count: int, tensors: dict) -> list:
    if kind == "stacked":
        return list(tensors[f"leaf{j}"].unbind(0)) if count else []
    if kind == "split":
        return [tensors[f"leaf{j}/{i}"] for i in range(count)]
    if kind == "json":
        values = json.loads(bytes(tensors[f"leaf{j}"].numpy()).decode("utf-8"))
        if len(values) != count:
            raise ValueError(f"leaf {j} has {len(values)} values for {count} elements")
        return [_from_json(v) for v in values]
    raise ValueError(f"unknown leaf kind {kind!r}")


# ----- files -------------------------------------------------------------------------------------
def write(path: str, elements: list, key: str, description: str = "") -> None:
    """Write ``elements`` (all of one structure) under ``key``, atomically."""
    tensors: dict = {}
    template, kinds = None, []
    if elements:
        template = _template(elements[0])
        columns = list(zip(*(structure.flatten(e) for e in elements)))
        kinds = [_encode_leaf(j, list(column), tensors) for j, column in enumerate(columns)]
    meta = {"format": FORMAT, "key": key, "count": len(elements), "structure": template, "kinds": kinds,
            "pipeline": description[:4000]}
    atomic_files.atomic_write(path, checked_safetensors.dumps(tensors, {_META: json.dumps(meta)}))


def read(path: str, key: str) -> tuple[list | None, dict | None]:
    """(elements, None) of the cache at ``path`` if it was written under ``key``; (None, its metadata) if
    it was written by another pipeline; (None, None) if there is none. Damage raises DataLossError."""
    if not os.path.exists(path):
        return None, None
    with open(path, "rb") as f:
        data = f.read()
    fix = f"Delete {path!r} to rebuild the cache."
    try:
        tensors, metadata = checked_safetensors.loads(data, path)
        meta = json.loads(metadata[_META])
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise ValueError(f"format {meta.get('format') if isinstance(meta, dict) else meta!r}, expected {FORMAT!r}")
        if meta.get("key") != key:
            return None, meta
        count = meta["count"]
        columns = [_decode_leaf(j, kind, count, tensors) for j, kind in enumerate(meta["kinds"])]
        leaves_per_element = zip(*columns) if columns else ([] for _ in range(count))
        elements = [_rebuild(meta["structure"], iter(leaves)) for leaves in leaves_per_element]
    except DataLossError as err:
        raise DataLossError(f"{err} {fix}") from err
    except (KeyError, ValueError, TypeError, IndexError, StopIteration, RuntimeError) as err:
        raise DataLossError(f"The dataset cache {path!r} is damaged ({type(err).__name__}: {err}). {fix}") from err
    if len(elements) != count:
        raise DataLossError(f"The dataset cache {path!r} holds {len(elements)} elements, expected {count}. {fix}")
    return elements, None


__all__ = ["cache_path", "read", "write", "FORMAT", "SUFFIX"]
