"""``md.keras.layers.Conv2DTranspose`` (keras.io's VAE and DCGAN use it) and ``SeparableConv2D`` (its image
classification from scratch) give Keras 3's shapes and numbers: kernels 1-5, strides 1-3, "same" and "valid",
a dilation, depth multipliers; their configs round-trip. (The layers are ``conv_extra.py``'s.)"""

import importlib.util
import json

import pytest
import torch

import multidev as md
from tests.conftest import run_fresh

COMPARE = """
import json, os
os.environ["KERAS_BACKEND"] = "torch"
import keras, numpy as np, torch
from multidev.keras import layers as md_layers
rng = np.random.RandomState(0)
worst, shapes = 0.0, []

def compare(name, combos, shape, **fixed):
    global worst
    for kwargs in combos:
        x = rng.rand(*shape).astype("float32")
        ref = getattr(keras.layers, name)(4, bias_initializer="random_normal", **fixed, **kwargs)
        want = ref(x).detach().numpy()
        ours = getattr(md_layers, name)(4, **fixed, **kwargs)
        ours(torch.from_numpy(x))
        ours.set_weights([np.asarray(w) for w in ref.get_weights()])
        got = ours(torch.from_numpy(x)).detach().numpy()
        shapes.append([list(got.shape), list(want.shape)])
        if got.shape == want.shape:
            worst = max(worst, float(np.abs(got - want).max()))

compare("Conv2DTranspose", [dict(kernel_size=k, strides=s, padding=p, dilation_rate=d) for k in (1, 2, 3, 4, 5)
                            for s in (1, 2, 3) for p in ("same", "valid")
                            for d in (((1, 1), (2, 1)) if s == 1 else ((1, 1),))], (2, 5, 4, 3))
compare("SeparableConv2D", [dict(kernel_size=k, strides=s, padding=p, depth_multiplier=m) for k in (1, 2, 3, 4)
                            for s in (1, 2, 3) for p in ("same", "valid") for m in (1, 2)], (2, 7, 6, 3))
print(json.dumps({"worst": worst, "shapes": shapes}))
"""


@pytest.mark.skipif(importlib.util.find_spec("keras") is None, reason="Keras 3 is not installed")
def test_same_numbers_and_shapes_as_keras_3():
    out = json.loads(run_fresh(COMPARE, timeout=300).stdout.strip().splitlines()[-1])
    assert len(out["shapes"]) == 40 + 48 and all(ours == theirs for ours, theirs in out["shapes"])
    assert out["worst"] < 1e-5


def test_shapes_and_config_round_trip():
    layer = md.keras.layers.Conv2DTranspose(3, 4, strides=2, padding="same", activation="relu")
    y = layer(torch.zeros(2, 5, 5, 2))
    assert tuple(y.shape) == (2, 10, 10, 3) and layer.kernel.shape == (4, 4, 3, 2)
    again = md.keras.layers.Conv2DTranspose.from_config(layer.get_config())
    assert again.get_config() == layer.get_config()
    sep = md.keras.layers.SeparableConv2D(4, 3, strides=2, padding="same", depth_multiplier=2)
    assert tuple(sep(torch.zeros(2, 7, 7, 3)).shape) == (2, 4, 4, 4)
    assert [tuple(w.shape) for w in sep.get_weights()] == [(3, 3, 3, 2), (1, 1, 6, 4), (4,)]
    assert md.keras.layers.SeparableConv2D.from_config(sep.get_config()).get_config() == sep.get_config()

