"""A numpy array next to a model's result is converted, as TensorFlow converts it: gradients flow.

``loss = md.reduce_mean(md.square(model(x) - y))`` with ``y`` a numpy array (the migrate guides' and
most TF tutorials' idiom): torch's operator refuses the array, so numpy computed the difference from the
result's detached snapshot and the loss trained nothing (``EagerTensor``'s ``numpy()`` is what let it).
"""

import numpy as np
import pytest
import torch

import multidev as md


@pytest.mark.parametrize("expr", [lambda o, y: o - y, lambda o, y: y - o, lambda o, y: o * y, lambda o, y: y / o,
                                  lambda o, y: y.T @ o, lambda o, y: y ** o, lambda o, y: o + y])
def test_gradient_flows_through_an_array_operand(expr):
    model = md.keras.Sequential([md.keras.layers.Dense(1, input_shape=(3,))])
    x, y = np.ones((2, 3), "float32"), np.full((2, 1), 0.5, "float32")
    with md.GradientTape() as tape:
        out = model(x)
        loss = md.reduce_mean(md.square(expr(out, y)))
    grads = tape.gradient(loss, model.trainable_variables)
    assert all(g is not None for g in grads)
    plain = expr(out.detach(), torch.as_tensor(y))   # the same arithmetic on tensors
    np.testing.assert_allclose(expr(out, y).detach().numpy(), plain.numpy(), rtol=1e-6)


def test_comparisons_with_arrays_and_hashing_still_work():
    out = md.keras.Sequential([md.keras.layers.Dense(1, input_shape=(3,))])(np.ones((2, 3), "float32"))
    assert (out > np.full((2, 1), -1e9, "float32")).all() and (out == out.detach().numpy()).all()
    assert {out: 1}[out] == 1
