"""Record TensorFlow's results of ``tf_array_ops_cases.CASES`` into ``tf_array_ops.json``.

Run once per TensorFlow release, in a venv with tensorflow-cpu (never in CI):
    /path/to/tf-venv/bin/python tests/api/record_tf_array_ops.py
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tf_array_ops_cases import CASES  # noqa: E402


def _arg(value):
    if isinstance(value, dict) and "t" in value:
        return tf.constant(value["t"], dtype=getattr(tf, value["dtype"]))
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return [_arg(v) for v in value]
    if isinstance(value, str):
        return getattr(tf, value)
    return value


def _kwargs(kwargs):
    return {k: (getattr(tf, v) if k in ("dtype", "dtype_hint") else v) for k, v in kwargs.items()}


def _observe(result):
    if isinstance(result, (list, tuple)):
        return [_observe(r) for r in result]
    array = np.asarray(result)
    return {"value": array.tolist(), "dtype": result.dtype.name, "shape": list(array.shape)}


def main() -> None:
    out = {"tensorflow": tf.__version__, "cases": {}}
    for case_id, op, args, kwargs in CASES:
        module, name = (tf.math, op.split(".", 1)[1]) if op.startswith("math.") else (tf, op)
        out["cases"][case_id] = _observe(getattr(module, name)(*[_arg(a) for a in args], **_kwargs(kwargs)))
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf_array_ops.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=0, sort_keys=True)
    print(f"wrote {len(out['cases'])} cases to {path}")


if __name__ == "__main__":
    main()
