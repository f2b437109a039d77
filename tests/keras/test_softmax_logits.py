"""(Sparse) categorical cross-entropy on the output of Keras's softmax computes from its logits, as Keras does.

A confidently wrong prediction (logits [30, 0, -30] for class 2) then costs 60 and keeps its gradient;
from clipped probabilities it costs -log(1e-7) = 16.118095 and has none.
Figures recorded with /work/tfvenv/bin/python (TensorFlow 2.21: tf.keras = Keras 3.15.1, and tf_keras 2.21
with TF_USE_LEGACY_KERAS=1, which agree on every figure below): the losses and metrics of the model below
on X, the gradient of their sum with respect to X under a GradientTape, and the kernel after one
``fit`` step with SGD(0.01) on the batch of 2 (Keras: [0.7, -4.07e-22, -0.7]).
"""

import warnings

import numpy as np
import pytest
import torch

import multidev as md
from multidev.keras import layers, losses, metrics, ops

X = np.array([[30.0], [-30.0]], "float32")
KERNEL = np.array([[1.0, 0.0, -1.0]], "float32")         # logits [30, 0, -30] and [-30, 0, 30]
LABELS = np.array([2, 0])                                 # both confidently wrong
ONE_HOT = np.eye(3, dtype="float32")[LABELS]
CLIPPED = 16.118095                                       # -log(1e-7): what clipped probabilities give


def _model(loss="sparse_categorical_crossentropy", softmax_layer=False):
    dense = layers.Dense(3, activation=None if softmax_layer else "softmax", use_bias=False)
    model = md.keras.Sequential([layers.Input((1,)), dense] + ([layers.Softmax()] if softmax_layer else []))
    model.set_weights([KERNEL])
    model.compile(md.keras.optimizers.SGD(0.01), loss=loss, metrics=[loss])
    return model


def _softmax_outputs():
    """Each way a Keras program gets a softmax: (name, function of x)."""
    kernel = torch.tensor(KERNEL)
    return [("Dense(activation='softmax')", _model()),
            ("Activation('softmax')", lambda x: layers.Activation("softmax")(x @ kernel)),
            ("layers.Softmax()", lambda x: layers.Softmax()(x @ kernel)),
            ("activations.softmax", lambda x: md.keras.activations.softmax(x @ kernel)),
            ("ops.softmax", lambda x: ops.softmax(x @ kernel))]


_LOSSES = [("SparseCategoricalCrossentropy", lambda p: losses.SparseCategoricalCrossentropy(reduction="none")(LABELS, p)),
           ("CategoricalCrossentropy", lambda p: losses.CategoricalCrossentropy(reduction="none")(ONE_HOT, p)),
           ("sparse_categorical_crossentropy", lambda p: losses.sparse_categorical_crossentropy(LABELS, p)),
           ("categorical_crossentropy", lambda p: losses.categorical_crossentropy(ONE_HOT, p)),
           ("ops.sparse_categorical_crossentropy", lambda p: ops.sparse_categorical_crossentropy(LABELS, p)),
           ("ops.categorical_crossentropy", lambda p: ops.categorical_crossentropy(ONE_HOT, p))]


def _value_and_grad(loss_fn, output_fn):
    x = torch.tensor(X, requires_grad=True)
    loss = loss_fn(output_fn(x))
    loss.sum().backward()
    return loss.detach(), x.grad.flatten()


def test_losses_through_every_keras_softmax_are_tensorflows():
    for out_name, output_fn in _softmax_outputs():
        for loss_name, loss_fn in _LOSSES:
            value, grad = _value_and_grad(loss_fn, output_fn)
            msg = f"{loss_name} on {out_name}"
            torch.testing.assert_close(value, torch.tensor([60.0, 60.0]), msg=msg)
            torch.testing.assert_close(grad, torch.tensor([2.0, -2.0]), msg=msg)       # clipped: [0, 0]


def test_a_plain_torch_softmax_or_a_new_tensor_is_clipped():
    kernel = torch.tensor(KERNEL)
    for output_fn in (lambda x: torch.softmax(x @ kernel, dim=-1),          # as tf.nn.softmax run eagerly
                      lambda x: ops.softmax(x @ kernel, axis=(1,)),         # Keras 3's tuple axis keeps none
                      lambda x: ops.softmax(x @ kernel) * 1.0):
        for loss_name, loss_fn in _LOSSES:
            value, grad = _value_and_grad(loss_fn, output_fn)
            torch.testing.assert_close(value, torch.tensor([CLIPPED, CLIPPED]), msg=loss_name)
            assert grad.abs().max() == 0


def test_metrics_see_the_logits_too():
    out = _model()(torch.tensor(X))
    for metric, labels in ((metrics.SparseCategoricalCrossentropy(), LABELS), (metrics.CategoricalCrossentropy(), ONE_HOT)):
        metric.update_state(labels, out)
        assert float(metric.result()) == pytest.approx(60.0)
    torch.testing.assert_close(metrics.sparse_categorical_crossentropy(LABELS, out), torch.tensor([60.0, 60.0]))
    assert float(metrics.SparseCategoricalAccuracy()(LABELS, out)) == 0.0           # the prediction itself


@pytest.mark.parametrize("loss", ["sparse_categorical_crossentropy", "categorical_crossentropy"])
def test_evaluate_and_one_fit_step_are_tensorflows(loss):
    labels = LABELS if loss.startswith("sparse") else ONE_HOT
    for softmax_layer in (False, True):
        model = _model(loss, softmax_layer)
        assert model.evaluate(X, labels, verbose=0) == pytest.approx([60.0, 60.0])
        history = model.fit(X, labels, epochs=1, batch_size=2, shuffle=False, verbose=0)
        assert history.history[loss] == pytest.approx([60.0])
        np.testing.assert_allclose(model.get_weights()[0].ravel(), [0.7, 0.0, -0.7], atol=1e-6)  # clipped: unchanged


def test_from_logits_on_a_softmax_output_warns_and_uses_the_logits():
    out = _model()(torch.tensor(X))
    for name, fn in (("sparse_categorical_crossentropy", lambda: losses.sparse_categorical_crossentropy(
                          LABELS, out, from_logits=True)),
                     ("categorical_crossentropy", lambda: losses.categorical_crossentropy(ONE_HOT, out, from_logits=True))):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.testing.assert_close(fn(), torch.tensor([60.0, 60.0]))
        assert any(f"`{name}` received `from_logits=True`, but the `output` argument was produced by a Softmax"
                   in str(w.message) for w in caught), [str(w.message) for w in caught]


def test_ops_sigmoid_keeps_logits_and_binary_crossentropy_takes_any_kept_logits():
    """Keras 3's ops.sigmoid keeps its logits; Keras (2 and 3) takes whichever logits an output keeps,
    so binary cross-entropy on a softmax output is the sigmoid cross-entropy of the softmax's logits
    (TF: 20.231049 = (30 + log 2 + 30) / 3, gradient +-2/3), and categorical on a sigmoid output is 60."""
    kernel = torch.tensor(KERNEL)
    for output_fn in (lambda x: ops.sigmoid(x @ kernel), lambda x: ops.softmax(x @ kernel)):
        value, grad = _value_and_grad(lambda p: losses.binary_crossentropy(ONE_HOT, p), output_fn)
        torch.testing.assert_close(value, torch.tensor([20.231049, 20.231049]))
        torch.testing.assert_close(grad, torch.tensor([2 / 3, -2 / 3]))
    elementwise = ops.binary_crossentropy(ONE_HOT, ops.sigmoid(torch.tensor(X) @ kernel))
    torch.testing.assert_close(elementwise, torch.tensor([[30.0, 0.6931472, 30.0]] * 2))
    value, _ = _value_and_grad(lambda p: losses.sparse_categorical_crossentropy(LABELS, p),
                               lambda x: md.keras.activations.sigmoid(x @ kernel))
    torch.testing.assert_close(value, torch.tensor([60.0, 60.0]))


def test_fit_on_two_replicas_takes_the_logits_too(fresh):
    """Each replica's loss sees its own softmax output's logits: the same step as one device (and as TF)."""
    proc = fresh("""
        import numpy as np, multidev as md
        from multidev.keras import layers
        cpu = md.config.list_physical_devices("CPU")[0]
        md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
        with md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]).scope():
            model = md.keras.Sequential([layers.Input((1,)), layers.Dense(3, activation="softmax", use_bias=False)])
            model.compile(md.keras.optimizers.SGD(0.01), loss="sparse_categorical_crossentropy")
        model.set_weights([np.array([[1.0, 0.0, -1.0]], "float32")])
        history = model.fit(np.array([[30.0], [-30.0]], "float32"), np.array([2, 0]), batch_size=2, verbose=0)
        print(history.history["loss"][0], *model.get_weights()[0].ravel())
    """)
    loss, *kernel = map(float, proc.stdout.split())
    assert loss == pytest.approx(60.0)
    np.testing.assert_allclose(kernel, [0.7, 0.0, -0.7], atol=1e-6)      # clipped: unchanged
