"""Functional models built from ops and operators on KerasTensors, written once for Keras 3 and md.keras:
``record_symbolic_ops.py`` runs them under TF 2.21's Keras 3 into ``tf_2.21_symbolic_ops.json``."""

import numpy as np

X = np.random.RandomState(0).randn(5, 4).astype("float32")
Y = np.random.RandomState(1).randn(5, 4).astype("float32") + 0.5

CASES = {
    "arithmetic": lambda a, b, ops: (a + b) * 2.0 - a / 255.0,
    "reflected": lambda a, b, ops: 1.0 - 2.0 * a + 3.0 / b,
    "floordiv_mod_pow": lambda a, b, ops: a // 0.5 + a % 0.7 + b ** 2,
    "neg_abs": lambda a, b, ops: -abs(a),
    "compare": lambda a, b, ops: ops.cast(a < b, "float32") + ops.cast(a >= 0.1, "float32"),
    "getitem": lambda a, b, ops: a[:, 1:3],
    "newaxis": lambda a, b, ops: a[:, None, ::2],
    "matmul": lambda a, b, ops: a @ ops.transpose(ops.reshape(ops.arange(8, dtype="float32"), (2, 4))),
    "concatenate_mean": lambda a, b, ops: ops.mean(ops.concatenate([a, b], axis=1), axis=1, keepdims=True),
    "expand_reshape": lambda a, b, ops: ops.reshape(ops.expand_dims(a, -1), (-1, 2, 2)),
    "relu_softmax": lambda a, b, ops: ops.softmax(ops.relu(a - b)),
    "mean_over_batch": lambda a, b, ops: ops.mean(a, axis=0),
    "transpose": lambda a, b, ops: ops.transpose(a),
}


def run(keras, ops) -> dict:
    """Each case's output shape and its values on (X, Y)."""
    out = {}
    for name, fn in CASES.items():
        a, b = keras.Input((4,)), keras.Input((4,))
        y = fn(a, b, ops)
        model = keras.Model([a, b], y)
        value = np.asarray(ops.convert_to_numpy(model([ops.convert_to_tensor(X), ops.convert_to_tensor(Y)])))
        out[name] = {"shape": list(y.shape), "dtype": str(value.dtype), "value": value.tolist()}
    return out
