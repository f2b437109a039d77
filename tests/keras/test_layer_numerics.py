"""Every md.keras layer computes TensorFlow 2.21 tf.keras's numbers, given TF's weights and inputs.

``tf_2.21_layer_numerics.json`` holds TF's side, recorded by ``record_layer_numerics.py`` over the
table of ``_layer_numerics_cases.py`` (no TensorFlow at test time). Each case builds the md layer,
``set_weights(tf_layer.get_weights())`` (TF's weight layout and order), and compares the output
(``training=False``, and ``training=True`` with the moving statistics after it where recorded) and the
gradients of ``sum(output * R)`` w.r.t. the inputs and trainable weights, within float32
reassociation. Also: activation functions called with their Keras keywords, regularizer losses, and
the statistics of the seeded initializers (their random streams differ from TF's).
"""

import base64
import builtins
import json
import os

import numpy as np
import pytest
import torch

import multidev as md
from tests.keras._layer_numerics_cases import (ACTIVATION_CALLS, CASES, INITIALIZERS, REGULARIZER_CASES, call_layer,
                                              make_layer)

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf_2.21_layer_numerics.json")) as _f:
    TF = json.load(_f)


# TF 2.21's AveragePooling1D/2D() raise TypeError (pool_size has no default); md's take 2, as its MaxPooling.
MORE_LENIENT = {"averagepool1d_0", "averagepool2d_0"}


def dec(e):
    dtype = np.int32 if e["t"] == "i" else np.float32
    return np.frombuffer(base64.b64decode(e["b"]), dtype=dtype).reshape(e["s"]).copy()


def close(got, want, what, rtol=1e-5):
    got = got.detach().numpy() if isinstance(got, torch.Tensor) else np.asarray(got)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != TF's {want.shape}"
    scale = max(float(np.abs(want).max(initial=0.0)), 1.0)
    err = float(np.abs(got.astype(np.float64) - want).max(initial=0.0))
    assert err <= rtol * scale + 1e-6, f"{what}: max error {err:.3g} (TF magnitude {scale:.3g})"


def _as_torch(x):
    return torch.from_numpy(x.astype(np.int64) if x.dtype == np.int32 else x)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_layer_matches_tf(case):
    case_id, cls, kwargs, _shapes, opts = case
    rec = TF["cases"][case_id]
    if "raises" in rec:
        if case_id in MORE_LENIENT:   # no TF program has it (TF raises), and md's own tests use it
            assert getattr(md.keras.layers, cls)(**kwargs).pool_size[0] == 2
            return
        with pytest.raises(getattr(builtins, rec["raises"])):
            getattr(md.keras.layers, cls)(**kwargs)
        return
    xs_np = [dec(e) for e in rec["inputs"]]
    mask = torch.from_numpy(dec(rec["mask"]).astype(bool)) if "mask" in rec else None
    layer = make_layer(md.keras.layers, cls, kwargs)
    call_layer(layer, [_as_torch(x) for x in xs_np], opts, False, mask, torch.tensor)              # build
    weights = [dec(e) for e in rec["weights"]]
    assert [tuple(w.shape) for w in layer.get_weights()] == [w.shape for w in weights], "weight layout/order"
    for key in ("infer", "train"):
        if key not in rec:
            continue
        layer.set_weights(weights)
        xs = [_as_torch(x).requires_grad_(x.dtype == np.float32) for x in xs_np]
        out = call_layer(layer, xs, opts, key == "train", mask, torch.tensor)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        want = rec[key]
        for i, (o, e) in enumerate(zip(outs, want["outputs"])):
            close(o, dec(e), f"{key} output {i}")
        loss = sum((o * torch.from_numpy(dec(r))).sum() for o, r in zip(outs, want["r"]))
        srcs = [x for x in xs if x.requires_grad] + list(layer.trainable_weights)
        grads = torch.autograd.grad(loss, srcs, allow_unused=True)
        for i, (g, e) in enumerate(zip(grads, want["grads"])):
            if e is not None:
                close(torch.zeros(e["s"]) if g is None else g, dec(e), f"{key} gradient {i}", rtol=2e-5)
        for i, (w, e) in enumerate(zip(layer.get_weights(), want["weights_after"])):
            close(w, dec(e), f"{key} weight {i} after the call")


@pytest.mark.parametrize("case", ACTIVATION_CALLS, ids=[c[0] for c in ACTIVATION_CALLS])
def test_activation_function_matches_tf(case):
    case_id, name, kwargs = case
    rec = TF["activations"][case_id]
    x = torch.from_numpy(dec(rec["x"])).requires_grad_()
    y = getattr(md.keras.activations, name)(x, **kwargs)
    close(y, dec(rec["y"]), "output")
    (y * torch.arange(15, dtype=torch.float32).reshape(3, 5) / 7).sum().backward()
    close(x.grad, dec(rec["grad"]), "gradient")


@pytest.mark.parametrize("case", REGULARIZER_CASES, ids=[c[0] for c in REGULARIZER_CASES])
def test_regularizer_losses_match_tf(case):
    case_id, cls, kwargs, _shape = case
    rec = TF["regularizers"][case_id]
    x = torch.from_numpy(dec(rec["x"]))
    kwargs = {k: md.keras.regularizers.get(v) if k.endswith("regularizer") else v for k, v in kwargs.items()}
    layer = getattr(md.keras.layers, cls)(**kwargs)
    layer(x)
    layer.set_weights([dec(e) for e in rec["weights"]])
    layer(x)
    got = [float(v) for v in layer.losses]
    assert len(got) == len(rec["losses"]) and np.allclose(got, rec["losses"], rtol=1e-5), (got, rec["losses"])


@pytest.mark.parametrize("case", INITIALIZERS, ids=[c[0] for c in INITIALIZERS])
def test_initializer_statistics_match_tf(case):
    """Seeded streams differ from TF's; the distribution (bounds, spread, truncation) must not."""
    case_id, name, config, shape = case
    rec = TF["initializers"][case_id]
    v = getattr(md.keras.initializers, name)(seed=7, **config)(shape).double().numpy()
    n = v.size
    assert abs(v.std() - rec["std"]) <= 4 * rec["std"] / np.sqrt(2 * n), (v.std(), rec["std"])
    assert abs(v.mean() - rec["mean"]) <= 5 * rec["std"] / np.sqrt(n), (v.mean(), rec["mean"])
    # bounds, relative to the spread: uniform limits (sqrt 3) and the 2-sigma truncation (2 / 0.8796)
    # hold tightly; an untruncated normal's largest draw only needs to go past the truncation bound.
    ratio = np.abs(v).max() / v.std()
    if rec["abs_max_over_std"] < 2.5:
        assert abs(ratio - rec["abs_max_over_std"]) <= 0.02 * rec["abs_max_over_std"], (ratio, rec)
    else:
        assert ratio > 3.0, (ratio, rec)
