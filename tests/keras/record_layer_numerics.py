"""Record TensorFlow 2.21's tf.keras numbers for the layer table of ``_layer_numerics_cases.py`` into
``tf_2.21_layer_numerics.json`` (run once per TF release, in TensorFlow's venv, never in CI):

    /work/tfvenv/bin/python tests/keras/record_layer_numerics.py

Per case: the weights (``get_weights``), a seeded input, the output with ``training=False`` (and
``training=True`` plus the weights after it where asked), and the gradients of
``sum(output * R)`` (R seeded) w.r.t. the float inputs and the trainable weights. Arrays are stored
as base64 of their float32/int32 bytes (exact and compact).
"""

from __future__ import annotations

import base64
import json
import os
import sys
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from _layer_numerics_cases import (ACTIVATION_CALLS, CASES, INITIALIZERS, REGULARIZER_CASES,  # noqa: E402
                                   call_layer, make_layer)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf_2.21_layer_numerics.json")


def enc(a):
    a = np.asarray(a)
    a = a.astype(np.int32) if a.dtype.kind in "iub" else a.astype(np.float32)
    return {"s": list(a.shape), "t": a.dtype.kind, "b": base64.b64encode(a.tobytes()).decode()}


def make_inputs(shapes, rng, grid=False):
    """Seeded inputs; ``grid``: multiples of 0.5 in about [-9, 9], so that ties (max pooling) and the
    kinks of the activations (0, thresholds, +-3 of hard_sigmoid, 6 of relu6) are hit exactly."""
    out = []
    for s in shapes:
        if s[0] == "int":
            out.append(rng.integers(0, s[2], size=s[1]).astype(np.int32))
        else:
            x = rng.standard_normal(s).astype(np.float32)
            out.append(np.round(x * 6) / 2 if grid else x)
    if grid and len(out) == 2 and out[0].shape == out[1].shape:   # merge layers: ties by construction
        out[1][..., ::2] = out[0][..., ::2]
    return out


def tf_mask(nested):
    return tf.constant(np.array(nested))


def run_case(case_id, cls, kwargs, shapes, opts, seed):
    rng = np.random.default_rng(seed)
    xs_np = make_inputs(shapes, rng, opts.get("grid", False))
    mask = None
    if opts.get("mask"):
        mask = rng.random((shapes[0][0], shapes[0][1], shapes[1][1])) > 0.3
        mask[:, :, 0] = True
        if opts["mask"] == "empty_row":   # a query that may attend to nothing (Keras: zero weights)
            mask[0, 1, :] = False
    layer = make_layer(tf.keras.layers, cls, kwargs)
    call_layer(layer, [tf.constant(x) for x in xs_np], opts, False, mask, tf_mask)   # build
    weights = [w.copy() for w in layer.get_weights()]
    rec = {"inputs": [enc(x) for x in xs_np], "weights": [enc(w) for w in weights]}
    if mask is not None:
        rec["mask"] = enc(mask)
    for training in ([False, True] if opts.get("train") else [False]):
        layer.set_weights(weights)
        xs = [tf.constant(x) for x in xs_np]
        watched = [x for x in xs if x.dtype == tf.float32]
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(watched)
            out = call_layer(layer, xs, opts, training, mask, tf_mask)
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            rs = [rng.standard_normal(o.shape).astype(np.float32) for o in outs]
            loss = tf.add_n([tf.reduce_sum(o * r) for o, r in zip(outs, rs)])
        srcs = watched + list(layer.trainable_weights)
        grads = tape.gradient(loss, srcs)
        key = "train" if training else "infer"
        rec[key] = {"outputs": [enc(o.numpy()) for o in outs], "r": [enc(r) for r in rs],
                    "grads": [None if g is None else enc(tf.convert_to_tensor(g).numpy()) for g in grads],
                    "weights_after": [enc(w) for w in layer.get_weights()]}
    return rec


def run_activation(name, kwargs, seed):
    x = np.random.default_rng(seed).standard_normal((3, 5)).astype(np.float32) * 3
    x[0, :4] = [-1.0, 0.0, 0.5, 1.0]
    xv = tf.Variable(x)
    with tf.GradientTape() as tape:
        y = getattr(tf.keras.activations, name)(xv, **kwargs)
        loss = tf.reduce_sum(y * np.arange(15, dtype=np.float32).reshape(3, 5) / 7)
    return {"x": enc(x), "y": enc(y.numpy()), "grad": enc(tape.gradient(loss, xv).numpy())}


def run_regularizer(cls, kwargs, shape, seed):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    layer = getattr(tf.keras.layers, cls)(**kwargs)
    layer(x)
    weights = layer.get_weights()
    layer.set_weights(weights)
    _ = layer(x)
    return {"x": enc(x), "weights": [enc(w) for w in weights], "losses": [float(v) for v in layer.losses]}


def run_initializer(name, config, shape):
    v = getattr(tf.keras.initializers, name)(seed=7, **config)(shape).numpy().astype(np.float64)
    return {"mean": float(v.mean()), "std": float(v.std()), "min": float(v.min()), "max": float(v.max()),
            "abs_max_over_std": float(np.abs(v).max() / v.std())}


def main():
    tf.keras.utils.set_random_seed(0)   # TF's initial weights too: a re-recording gives the same file
    result = {"tensorflow": tf.__version__, "keras": tf.keras.__version__ if hasattr(tf.keras, "__version__") else "",
              "cases": {}, "activations": {}, "regularizers": {}, "initializers": {}}
    for cid, cls, kwargs, shapes, opts in CASES:
        try:
            result["cases"][cid] = run_case(cid, cls, kwargs, shapes, opts, seed=zlib.crc32(cid.encode()))
        except Exception as e:   # recorded: md must refuse as TF does
            result["cases"][cid] = {"raises": type(e).__name__, "message": str(e)[:300]}
    for i, (cid, name, kwargs) in enumerate(ACTIVATION_CALLS):
        result["activations"][cid] = run_activation(name, kwargs, seed=2000 + i)
    for i, (cid, cls, kwargs, shape) in enumerate(REGULARIZER_CASES):
        result["regularizers"][cid] = run_regularizer(cls, kwargs, shape, seed=3000 + i)
    for cid, name, config, shape in INITIALIZERS:
        result["initializers"][cid] = run_initializer(name, config, shape)
    with open(OUT, "w") as f:
        json.dump(result, f, separators=(",", ":"))
    print(f"wrote {OUT}: {os.path.getsize(OUT)} bytes; raises:",
          {k: v["raises"] for k, v in result["cases"].items() if "raises" in v})


if __name__ == "__main__":
    main()
