"""Fingerprints of collective calls: what each process is about to do, exchanged before the data.

A fingerprint is a row of ``FIELDS`` int64s: magic, sequence number, op, dtype, op argument, numel,
ndim and up to four dims (further dims folded into one product). Processes all-gather their rows
before each collective; if the rows disagree (order, shape, dtype, reduce op or broadcast source)
every process raises the same error naming the call on each worker, instead of hanging or
exchanging garbage. Plain integers only: nothing received is unpickled.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import torch

from multidev._core.user_warnings import warn_user

FIELDS = 12
MAGIC = 0x6D64  # "md": a row that does not start with it is not a multidev fingerprint
OPS = ("barrier", "all_reduce", "all_gather", "broadcast", "batch_all_reduce")
DTYPES = (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.uint8, torch.int8,
    torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128,
)
REDUCE_OP_NAMES = ("SUM", "MEAN")
_MAX_DIMS = 4
_SEQ, _OP, _DTYPE, _EXTRA, _NUMEL, _NDIM, _DIM0 = 1, 2, 3, 4, 5, 6, 7
_MIXED = -2  # dtype field of a batch whose tensors have different dtypes


def warn_unchecked() -> None:
    """Say once per process that collectives run unchecked (wrong results are then possible)."""
    warn_user(
        "Collective fingerprints are off (MULTIDEV_COLLECTIVE_FINGERPRINTS=0 or check_fingerprints="
        "False): workers making different calls are not detected. A mismatch then hangs until the "
        "timeout or gives a wrong result silently, e.g. an all-reduce of shape (2, 3) on one worker and "
        "(3, 2) on another adds them element by element. Turn them back on to diagnose.",
        RuntimeWarning,
    )


def dtype_code(dtype: torch.dtype) -> int:
    """Stable small code of a dtype; TypeError for dtypes collectives do not carry."""
    try:
        return DTYPES.index(dtype)
    except ValueError:
        raise TypeError(
            f"Collectives across processes do not support dtype {dtype}; supported: "
            f"{[str(d).replace('torch.', '') for d in DTYPES]}."
        ) from None


def encode(seq: int, op: str, tensor: torch.Tensor | None = None, extra: int = 0) -> list[int]:
    """The fingerprint row of call ``seq``: collective ``op`` on ``tensor`` with argument ``extra``.

    Example:
        >>> row = encode(3, "all_reduce", torch.zeros(4, 2), extra=0)
        >>> describe(row)
        'all_reduce #3 (shape=(4, 2), dtype=float32, op=SUM)'
    """
    dims = [-1] * (_MAX_DIMS + 1)
    if tensor is None:
        dtype, numel, ndim = -1, 0, -1
    else:
        shape = tuple(tensor.shape)
        dtype, numel, ndim = dtype_code(tensor.dtype), tensor.numel(), len(shape)
        dims[: min(ndim, _MAX_DIMS)] = shape[:_MAX_DIMS]
        tail = 1
        for d in shape[_MAX_DIMS:]:
            tail *= d
        dims[_MAX_DIMS] = tail
    return [MAGIC, seq, OPS.index(op), dtype, extra, numel, ndim, *dims]


def encode_batch(seq: int, op: str, tensors: Sequence[torch.Tensor], extra: int = 0) -> list[int]:
    """The row of a call on several tensors: their count, total size, dtype and a digest of all shapes.

    Example:
        >>> describe(encode_batch(2, "batch_all_reduce", [torch.zeros(3), torch.zeros(2, 2)]))
        'batch_all_reduce #2 (2 tensors, 7 elements, dtype=float32, op=SUM)'
    """
    codes = {dtype_code(t.dtype) for t in tensors}
    layout = repr([(tuple(t.shape), dtype_code(t.dtype)) for t in tensors]).encode()
    dims = [zlib.crc32(layout), zlib.adler32(layout), -1, -1, -1]
    dtype = codes.pop() if len(codes) == 1 else _MIXED
    return [MAGIC, seq, OPS.index(op), dtype, extra, sum(t.numel() for t in tensors), len(tensors), *dims]


def is_valid(row: Sequence[int]) -> bool:
    """True when ``row`` is a well-formed fingerprint (right length, magic and codes)."""
    return (
        len(row) == FIELDS and row[0] == MAGIC and 0 <= row[_OP] < len(OPS) and _MIXED <= row[_DTYPE] < len(DTYPES)
    )


def _shape_text(row: Sequence[int]) -> str:
    ndim = row[_NDIM]
    dims = list(row[_DIM0:_DIM0 + min(ndim, _MAX_DIMS)])
    if ndim > _MAX_DIMS:
        return f"({', '.join(map(str, dims))}, ... {ndim - _MAX_DIMS} more dims of {row[_DIM0 + _MAX_DIMS]} elements)"
    return str(tuple(dims))


def describe(row: Sequence[int]) -> str:
    """``all_reduce #17 (shape=(4,), dtype=float32, op=SUM)``: a row in words, for error messages."""
    if not is_valid(row):
        return f"<not a multidev collective call: {list(row)!r}>"
    op = OPS[row[_OP]]
    parts = []
    if op == "batch_all_reduce":
        parts.append(f"{row[_NDIM]} tensors, {row[_NUMEL]} elements")
    elif row[_NDIM] >= 0:
        parts.append(f"shape={_shape_text(row)}")
    if row[_DTYPE] >= 0:
        parts.append(f"dtype={str(DTYPES[row[_DTYPE]]).replace('torch.', '')}")
    elif row[_DTYPE] == _MIXED:
        parts.append("mixed dtypes")
    extra = row[_EXTRA]
    if op in ("all_reduce", "batch_all_reduce"):
        parts.append(f"op={REDUCE_OP_NAMES[extra] if 0 <= extra < len(REDUCE_OP_NAMES) else extra}")
    if op == "broadcast":
        parts.append(f"src={extra}")
    args = f" ({', '.join(parts)})" if parts else ""
    return f"{op} #{row[_SEQ]}{args}"


def _comparable(row: Sequence[int]) -> tuple:
    """What must agree across processes: everything, except all_gather's first dim (and so numel)."""
    key = list(row)
    if is_valid(row) and OPS[row[_OP]] == "all_gather":
        key[_NUMEL] = key[_DIM0] = None
    return tuple(key)


def first_dims(rows: Sequence[Sequence[int]]) -> list[int]:
    """Each process's first dimension (all_gather's sizes); 1 for a 0-d tensor."""
    return [row[_DIM0] if row[_NDIM] > 0 else 1 for row in rows]


def mismatch(rows: Sequence[Sequence[int]]) -> bool:
    """True when the processes' rows disagree (or one is malformed)."""
    if not all(is_valid(r) for r in rows):
        return True
    keys = {_comparable(r) for r in rows}
    return len(keys) > 1


def mismatch_message(rows: Sequence[Sequence[int]], names: Sequence[str]) -> str:
    """The error naming the call on each worker (``names[i]`` describes rank ``i``)."""
    calls = "; ".join(f"{name} called {describe(row)}" for name, row in zip(names, rows))
    return (
        f"Collective mismatch across workers: {calls}. Every worker must issue the same collectives "
        "in the same order, with the same shapes, dtypes and arguments (all_gather may differ in its "
        "first dimension). Look for a branch that depends on the worker (rank, data size, a "
        "condition on local values). The check can be turned off with MULTIDEV_COLLECTIVE_FINGERPRINTS=0."
    )


__all__ = ["FIELDS", "encode", "encode_batch", "describe", "is_valid", "first_dims", "mismatch", "mismatch_message", "dtype_code", "warn_unchecked"]
