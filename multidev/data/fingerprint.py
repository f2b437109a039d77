"""A fingerprint of a dataset pipeline, so a ``cache(filename)`` file is only replayed by the pipeline
that wrote it.

The description lists every node of the graph (sink first) with its type and arguments: numbers,
strings and other plain values by ``repr``; tensors and arrays by dtype, shape and a SHA-256 of
their bytes; functions (``map``, ``filter``, generators) by their code, defaults, closure values
and the global values they read (except mutable containers: module-level lists and dicts are
often accumulators, e.g. logs; capture a lookup table in a closure or default to key on it);
a path to an existing file with its size and mtime.
Objects of other types count by their type only. Two pipelines built by the same code from the
same data get the same fingerprint, in any process. The element structure (``element_spec``)
follows from the description, so it is not computed here (that would run ``map`` functions).

Example:
    key = pipeline_fingerprint(md.data.Dataset.range(3).map(f))
"""

from __future__ import annotations

import functools
import hashlib
import os
import types
from typing import Any

import numpy as np
import torch

_SKIP = {"_inputs", "_spec_cache", "_store", "_filename", "_key"}   # not part of what a node computes
_MAX_DEPTH = 6
_PLAIN = (int, float, complex, bool, str, bytes, type(None), range, slice, torch.dtype, np.dtype)


def pipeline_fingerprint(dataset) -> str:
    """SHA-256 (hex) of ``describe_pipeline(dataset)``."""
    return hashlib.sha256(describe_pipeline(dataset).encode("utf-8", "backslashreplace")).hexdigest()


def describe_pipeline(dataset) -> str:
    """One line per node: its type and its arguments (see module doc)."""
    lines = []
    for depth, node in _nodes(dataset, 0):
        args = ", ".join(f"{k}={_describe(v, 0)}" for k, v in sorted(vars(node).items()) if k not in _SKIP)
        lines.append(f"{'  ' * depth}{type(node).__module__}.{type(node).__qualname__}({args})")
    return "\n".join(lines)


def _nodes(dataset, depth: int):
    yield depth, dataset
    for source in dataset._inputs:
        yield from _nodes(source, depth + 1)


def _describe(value: Any, depth: int) -> str:
    if depth > _MAX_DEPTH:
        return f"<{_type_name(value)}>"
    if isinstance(value, bool) or isinstance(value, _PLAIN):
        return _plain(value)
    if isinstance(value, torch.Tensor):
        return _tensor(value)
    if isinstance(value, np.ndarray):
        return _array(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return f"{type(value).__name__}[" + ",".join(_describe(v, depth + 1) for v in items) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_describe(k, depth + 1)}:{_describe(v, depth + 1)}" for k, v in value.items()) + "}"
    if isinstance(value, functools.partial):
        return (f"partial({_describe(value.func, depth + 1)},{_describe(value.args, depth + 1)},"
                f"{_describe(value.keywords, depth + 1)})")
    if isinstance(value, types.MethodType):
        return f"method({_describe(value.__func__, depth + 1)} of {_type_name(value.__self__)})"
    if isinstance(value, types.FunctionType):
        return _function(value, depth)
    if hasattr(value, "_inputs") and hasattr(value, "_iterate"):   # a nested dataset (e.g. flat_map's)
        return "dataset(" + describe_pipeline(value).replace("\n", ";") + ")"
    return f"<{_type_name(value)}>"


def _plain(value: Any) -> str:
    text = repr(value)
    if isinstance(value, str) and len(value) < 4096:
        try:
            if os.path.isfile(value):
                stat = os.stat(value)
                text += f"@{stat.st_size}:{stat.st_mtime_ns}"
        except (OSError, ValueError):
            pass
    return text


def _tensor(t: torch.Tensor) -> str:
    t = t.detach().to("cpu").contiguous()
    data = t.reshape(-1).view(torch.uint8).numpy() if t.numel() else b""
    return f"tensor({t.dtype},{tuple(t.shape)},{hashlib.sha256(data).hexdigest()})"


def _array(a: np.ndarray) -> str:
    if a.dtype == object:
        digest = hashlib.sha256(repr(a.tolist()).encode("utf-8", "backslashreplace")).hexdigest()
    else:
        digest = hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()
    return f"array({a.dtype},{a.shape},{digest})"


def _function(fn: types.FunctionType, depth: int) -> str:
    code = fn.__code__
    parts = [fn.__module__ or "", fn.__qualname__, _code(code)]
    parts.append(_describe(fn.__defaults__, depth + 1))
    parts.append(_describe(fn.__kwdefaults__, depth + 1))
    for cell in fn.__closure__ or ():
        try:
            parts.append(_describe(cell.cell_contents, depth + 1))
        except ValueError:   # an empty cell
            parts.append("<empty>")
    for name in code.co_names:
        value = fn.__globals__.get(name)
        if isinstance(value, (_PLAIN, torch.Tensor, np.ndarray, tuple, types.FunctionType)):
            parts.append(f"{name}={_describe(value, depth + 1)}")
    return "fn(" + ";".join(parts) + ")"


def _code(code: types.CodeType) -> str:
    h = hashlib.sha256(code.co_code)
    for const in code.co_consts:
        h.update((_code(const) if isinstance(const, types.CodeType) else repr(const)).encode("utf-8", "replace"))
    h.update(repr((code.co_names, code.co_varnames, code.co_freevars)).encode())
    return h.hexdigest()[:32]


def _type_name(value: Any) -> str:
    return f"{type(value).__module__}.{type(value).__qualname__}"


__all__ = ["pipeline_fingerprint", "describe_pipeline"]
