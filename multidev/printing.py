"""``md.print``: TensorFlow's ``tf.print``, which the distributed-input guide uses to show
per-replica values: tensors in numpy's layout without dtype (``[0 1]``, at most ``summarize``
entries at each end of a dimension), nested structures around them, to stderr by default.

    >>> import multidev as md, sys
    >>> md.print(md.constant([1.5, 2.0]), "done", output_stream=sys.stdout)
    [1.5 2] done
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import torch


def print(*inputs: Any, output_stream: Any = None, summarize: int = 3, sep: str = " ", end: str = "\n",  # noqa: A001
          name: str | None = None) -> None:
    """Print ``inputs`` as ``tf.print`` does (``output_stream``: ``sys.stderr`` by default,
    ``sys.stdout``, or ``"file://<path>"`` to append to a file; ``summarize=-1`` prints every entry)."""
    text = sep.join(_format(x, summarize) for x in inputs) + end
    stream = sys.stderr if output_stream is None else output_stream
    if isinstance(stream, str):
        if not stream.startswith("file://"):
            raise ValueError(f"output_stream {stream!r} is not supported: pass sys.stdout, sys.stderr or "
                             "'file://<path>'.")
        with open(stream[len("file://"):], "a", encoding="utf-8") as f:
            f.write(text)
        return
    if not hasattr(stream, "write"):
        raise ValueError(f"output_stream {stream!r} is not supported: pass sys.stdout, sys.stderr or 'file://<path>'.")
    stream.write(text)


def _format(value: Any, summarize: int) -> str:
    if isinstance(value, torch.Tensor):
        return _array(value.detach().cpu().numpy(), summarize, 0)
    if isinstance(value, np.ndarray):
        return _array(value, summarize, 0)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_format(v, summarize)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_format(v, summarize) for v in value) + "]"
    if isinstance(value, tuple) and not hasattr(type(value), "_fields"):
        return "(" + ", ".join(_format(v, summarize) for v in value) + ")"
    return str(value)


def _array(a: np.ndarray, summarize: int, depth: int) -> str:
    if a.ndim == 0:
        return _scalar(a.item())
    n = a.shape[0]
    cut = 0 <= summarize and 2 * summarize < n
    indices = list(range(summarize)) + [None] + list(range(n - summarize, n)) if cut else list(range(n))
    parts = ["..." if i is None else _array(a[i], summarize, depth + 1) for i in indices]
    if a.ndim == 1:
        return "[" + " ".join(parts) + "]"
    return "[" + ("\n" * (a.ndim - 1) + " " * (depth + 1)).join(parts) + "]"


def _scalar(x: Any) -> str:
    if isinstance(x, bool):
        return "1" if x else "0"
    if isinstance(x, float):
        return f"{x:g}"
    if isinstance(x, (bytes, str)):
        return '"' + (x.decode() if isinstance(x, bytes) else x) + '"'
    return str(x)
