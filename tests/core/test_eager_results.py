"""What a TF program reads from a model, a loss or an ``md.*`` op with ``.numpy()``, ``float()``, ``format``.

TensorFlow's beginner quickstart calls ``model(x_train[:1]).numpy()`` on its second use of the
model; its guides print ``loss.numpy()`` and ``f"{loss:1.5f}"`` after a tape. torch refuses
``numpy()`` of a tensor that requires grad; multidev's top-level results read a detached snapshot
and stay in the autograd graph (``tape.gradient`` and ``loss.backward()`` still see them).
"""

import pickle
import warnings

import numpy as np
import pytest
import torch

import multidev as md

K = md.keras


def _quickstart_model():
    torch.manual_seed(0)
    return K.models.Sequential([
        K.layers.Flatten(input_shape=(28, 28)),
        K.layers.Dense(16, activation="relu"),
        K.layers.Dropout(0.2),
        K.layers.Dense(10),
    ])


def test_beginner_quickstart_lines_as_printed():
    x_train = np.random.default_rng(0).random((8, 28, 28)).astype("float32")
    y_train = np.arange(8) % 10
    model = _quickstart_model()
    predictions = model(x_train[:1]).numpy()
    assert isinstance(predictions, np.ndarray) and predictions.shape == (1, 10)
    loss_fn = K.losses.SparseCategoricalCrossentropy(from_logits=True)
    first = loss_fn(y_train[:1], model(x_train[:1])).numpy()      # the loss of the live output, read directly
    assert first.shape == () and np.isclose(first, loss_fn(y_train[:1], predictions).numpy(), rtol=1e-6)
    probability_model = K.Sequential([model, K.layers.Softmax()])
    np.testing.assert_allclose(probability_model(x_train[:5]).numpy().sum(axis=1), np.ones(5), rtol=1e-6)
    assert np.asarray(model(x_train[:2])).shape == (2, 10)
    assert np.argmax(model(x_train[:2])[0].numpy()) in range(10)       # a row of the output reads too


def test_results_stay_in_the_autograd_graph():
    model = _quickstart_model()
    x = torch.rand(4, 28, 28)
    y = torch.tensor([1, 2, 3, 4])
    loss_fn = K.losses.SparseCategoricalCrossentropy(from_logits=True)
    with md.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=False))
    grads = tape.gradient(loss, model.trainable_variables)
    assert all(g is not None for g in grads)
    model.zero_grad()
    loss_fn(y, model(x, training=False)).backward()
    for p, g in zip(model.trainable_variables, grads):
        torch.testing.assert_close(p.grad, g)
    out = model(x)
    assert type(torch.relu(out)) is torch.Tensor    # torch functions on a result are plain tensors (no cost)


def test_scalar_reads_without_warnings_as_tensorflow():
    w = torch.ones(3, requires_grad=True)
    loss = md.reduce_mean(md.square(w * 2.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")     # torch warns when a tensor that requires grad becomes a number
        assert float(loss) == 4.0 and loss.item() == 4.0 and int(loss) == 4 and bool(loss)
        assert f"{loss:1.5f}" == "4.00000" and "{}".format(loss.numpy()) == "4.0"
        assert md.nn.compute_average_loss(w * 3.0, global_batch_size=3).numpy() == 3.0
        assert md.reduce_sum(w).tolist() == 3.0 and md.add_n([w, w]).numpy().tolist() == [2.0, 2.0, 2.0]
    assert repr(loss) == "tensor(4., grad_fn=<MeanBackward0>)"    # torch's text, naming the op that made it
    assert loss.requires_grad and loss.grad_fn is not None


def test_structures_and_plain_inputs():
    class TwoHeads(K.Model):
        def __init__(self):
            super().__init__()
            self.a, self.b = K.layers.Dense(2), K.layers.Dense(3)

        def call(self, x):
            return {"a": self.a(x)}, [self.b(x), x]

    heads, (b, x_out) = TwoHeads()(torch.ones(1, 4))
    assert heads["a"].numpy().shape == (1, 2) and b.numpy().shape == (1, 3)
    assert type(x_out) is torch.Tensor                      # no grad: handed back as it came
    no_grad = md.reduce_sum(md.constant([1.0, 2.0]))
    assert type(no_grad) is torch.Tensor


def test_results_save_as_plain_tensors():
    """pickle and torch.save keep a result as a plain tensor (a file never names multidev's class)."""
    out = md.reduce_sum(torch.ones(2, requires_grad=True) * 1.0)
    back = pickle.loads(pickle.dumps(out))
    assert type(back) is torch.Tensor and back.item() == 2.0


def test_keras_attributes_travel_between_top_level_calls():
    """A mask made by one layer called on its own reaches the next (the masking guide's cells)."""
    ids = torch.tensor([[3, 1, 0, 0], [2, 0, 0, 0]])
    embedded = K.layers.Embedding(5, 4, mask_zero=True)(ids)
    assert type(embedded).__name__ == "EagerTensor"
    assert embedded._keras_mask.tolist() == [[True, True, False, False], [True, False, False, False]]
    assert K.layers.LSTM(3)(embedded).numpy().shape == (2, 3)


def test_convert_to_tensor_of_a_variable_is_a_differentiable_snapshot():
    """TF 2.21: ``tf.convert_to_tensor(v)`` keeps the value read (a later ``assign_add`` leaves it) and a
    tape still differentiates through it."""
    v = md.Variable([1.0, 2.0])
    t = md.convert_to_tensor(v)
    v.assign_add([1.0, 1.0])
    assert t.numpy().tolist() == [1.0, 2.0]
    with md.GradientTape() as tape:
        y = md.reduce_sum(md.convert_to_tensor(v) * 3.0)
    assert tape.gradient(y, v).tolist() == [3.0, 3.0]
    assert md.convert_to_tensor(v, dtype=md.float64).dtype == torch.float64
