"""Results derived from a model's output, a loss or a variable by Python operators and ``md.*`` ops read
with ``.numpy()`` as TensorFlow's eager tensors do: TF's beginner quickstart typed with ``md.`` as
printed (``tf.nn.softmax(predictions).numpy()``), its neighbours (``(model(x) * 2).numpy()``,
``md.argmax(model(x), axis=1)``, ``-loss``, ``(v * 3).numpy()``), and Python ints made int32 by
``md.Variable`` as by ``md.constant`` (TF 2.21 checked)."""

import numpy as np
import pytest
import torch

import multidev as md

K = md.keras


def _model():
    torch.manual_seed(0)
    return K.models.Sequential([K.layers.Flatten(input_shape=(28, 28)), K.layers.Dense(16, activation="relu"),
                                K.layers.Dropout(0.2), K.layers.Dense(10)])


def test_beginner_quickstart_softmax_line_and_its_neighbours():
    x = np.random.default_rng(0).random((4, 28, 28)).astype("float32")
    y = np.array([1, 2, 3, 4])
    model = _model()
    predictions = model(x[:1]).numpy()
    probabilities = md.nn.softmax(predictions).numpy()           # the tutorial's line, on a numpy array
    assert probabilities.shape == (1, 10) and probabilities.dtype == np.float32
    np.testing.assert_allclose(probabilities.sum(), 1.0, rtol=1e-6)
    np.testing.assert_allclose(md.nn.softmax(model(x[:1])).numpy(), probabilities, rtol=1e-6)   # a live output
    np.testing.assert_allclose(np.exp(md.nn.log_softmax(predictions, axis=-1).numpy()), probabilities, rtol=1e-5)
    assert md.math.softmax is md.nn.softmax and md.math.log_softmax is md.nn.log_softmax   # TF's aliases
    out = model(x)
    assert (out * 2).numpy().shape == (4, 10) and (2 * out + 1).numpy().shape == (4, 10)
    assert (-out).numpy().shape == (4, 10) and abs(out).numpy().min() >= 0
    assert ((out - out.numpy()) ** 2 / 2).numpy().max() == 0.0      # chains of operators stay readable
    assert md.argmax(model(x), axis=1).numpy().shape == (4,)
    loss_fn = K.losses.SparseCategoricalCrossentropy(from_logits=True)
    loss = loss_fn(y, model(x))
    assert loss.numpy().shape == () and md.reduce_mean(loss).numpy() == pytest.approx(float(loss))
    assert (loss * 0.5).numpy() == pytest.approx(float(loss) / 2) and f"{loss + 1:.3f}"
    assert (out * 2).requires_grad and type(torch.relu(out)) is torch.Tensor    # torch functions: plain


def test_softmax_follows_tensorflow_on_dtypes_axes_and_bad_input():
    assert md.nn.softmax(np.array([[1.0, 2.0]])).dtype == torch.float64       # numpy's float64 kept, as TF
    assert md.nn.softmax([[1.0, 2.0]]).dtype == torch.float32                 # Python floats: float32
    np.testing.assert_allclose(md.nn.softmax(np.ones((2, 3), "float32"), axis=0).numpy(), np.full((2, 3), 0.5))
    with pytest.raises(md.errors.InvalidArgumentError, match="int64 is not in the list of allowed values.*md.cast"):
        md.nn.softmax(np.array([1, 2]))
    with pytest.raises(md.errors.InvalidArgumentError, match=r"range \[-2, 2\).*Received: dim=3"):
        md.nn.softmax(np.ones((1, 3), "float32"), axis=3)
    with pytest.raises(TypeError, match="`axis` must be an int.*0.5"):
        md.nn.softmax(np.ones((1, 3), "float32"), axis=0.5)
    with pytest.raises(AttributeError, match=r"torch\.relu"):
        md.nn.relu                                                             # still torch's to call


def test_variable_operators_read_as_tensorflows():
    v = md.Variable(2.0)
    assert (v * 3).numpy() == 6.0 and (3 * v).numpy() == 6.0 and (v + [1.0]).numpy().tolist() == [3.0]
    assert (-v).numpy() == -2.0 and (v ** 2 - v).numpy() == 2.0
    with md.GradientTape() as tape:
        y = v * v
    assert tape.gradient(y, v).numpy() == 4.0 and y.numpy() == 4.0


def test_python_ints_make_int32_variables_as_constants():
    assert md.Variable(1).dtype == md.constant(1).dtype == md.range(3).dtype == torch.int32
    assert md.Variable([1, 2]).dtype == torch.int32 and md.Variable(2**40).dtype == torch.int64   # TF: int64
    assert md.Variable(np.int64(1)).dtype == torch.int64 and md.Variable(np.array([1, 2])).dtype == torch.int64
    assert md.Variable(True).dtype == torch.bool and md.Variable(1.5).dtype == torch.float32
    assert md.Variable(1, dtype=md.int64).dtype == torch.int64
    step = md.Variable(0)
    step.assign_add(1)
    assert int(step) == 1 and step.dtype == torch.int32
    table = torch.arange(10.0)
    assert table[md.Variable([1, 3])].tolist() == [1.0, 3.0]                  # torch indexes with int32
    assert torch.nn.Embedding(5, 2)(md.Variable([0, 4])).shape == (2, 2)
