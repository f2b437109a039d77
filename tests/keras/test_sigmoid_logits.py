"""Binary cross-entropy on the output of Keras's sigmoid computes from its logits, as Keras does.

A confidently wrong prediction (sigmoid(30) for a 0 label) then keeps its gradient; with clipped
probabilities it has none and training stalls (TF's parameter-server tutorial did not learn).
Figures from TensorFlow 2.21 (tf_keras): loss 30 for each example, gradient +-1, and the kernel
at 0.7 after one SGD(0.01) step of ``fit``.
"""

import warnings

import numpy as np
import pytest
import torch

import multidev as md
from multidev.keras import layers, losses

X = np.array([[30.0], [-30.0]], "float32")
Y = np.array([[0.0], [1.0]], "float32")


def _model():
    model = md.keras.Sequential([layers.Input((1,)),
                                 layers.Dense(1, activation="sigmoid", kernel_initializer="ones", use_bias=False)])
    model.compile(md.keras.optimizers.SGD(0.01), loss="binary_crossentropy", metrics=["binary_crossentropy"])
    return model


def test_loss_and_gradient_through_a_dense_sigmoid_are_tensorflows():
    x = torch.tensor(X, requires_grad=True)
    loss = losses.BinaryCrossentropy(reduction="none")(torch.tensor(Y), _model()(x))
    loss.sum().backward()
    torch.testing.assert_close(loss, torch.tensor([30.0, 30.0]))
    torch.testing.assert_close(x.grad.flatten(), torch.tensor([1.0, -1.0]))      # clipped: [0, 0]


def test_activation_layer_function_form_evaluate_and_fit():
    out = layers.Activation("sigmoid")(torch.tensor(X))
    torch.testing.assert_close(losses.binary_crossentropy(Y, out), torch.tensor([30.0, 30.0]))
    model = _model()
    assert model.evaluate(X, Y, verbose=0) == pytest.approx([30.0, 30.0])
    model.fit(X, Y, epochs=1, batch_size=2, shuffle=False, verbose=0)
    assert float(model.get_weights()[0].ravel()[0]) == pytest.approx(0.7, abs=1e-6)   # clipped: stays at 1.0


def test_only_keras_sigmoid_carries_logits():
    z = torch.tensor(X, requires_grad=True)
    loss = losses.binary_crossentropy(Y, torch.sigmoid(z))       # a plain torch op: clipped, as tf.sigmoid in TF
    loss.sum().backward()
    assert float(loss.detach().max()) < 17.0 and z.grad.abs().max() == 0
    sliced = layers.Activation("sigmoid")(torch.tensor(X))[:, :1] * 1.0     # a new tensor: no logits
    assert float(losses.binary_crossentropy(Y, sliced).max()) < 17.0


def test_from_logits_on_a_sigmoid_output_warns_and_uses_the_logits():
    out = layers.Activation("sigmoid")(torch.tensor(X))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = losses.binary_crossentropy(Y, out, from_logits=True)
    torch.testing.assert_close(value, torch.tensor([30.0, 30.0]))
    assert any("received `from_logits=True`" in str(w.message) for w in caught)


def test_recurrent_layers_still_take_the_sigmoid_by_name_and_callable():
    for act in ("sigmoid", md.keras.activations.get("sigmoid"), torch.sigmoid):
        assert layers.LSTM(2, recurrent_activation=act)(torch.zeros(1, 3, 2)).shape == (1, 2)
