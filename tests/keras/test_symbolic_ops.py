"""Ops and operators on functional KerasTensors (keras/layers/symbolic_ops.py): ``inputs / 255.0``,
``x + residual``, ``ops.concatenate``, ``md.reduce_mean`` build op nodes that run, train, save and
load, and list in the summary as Keras 3's operations (tf.keras 2's ``TFOpLambda`` for ``md.*``)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

import multidev as md
from tests.conftest import run_fresh

K, ops = md.keras, md.keras.ops

X = torch.from_numpy(np.random.RandomState(0).randn(5, 4).astype("float32"))
Y = torch.from_numpy(np.random.RandomState(1).randn(5, 4).astype("float32")) + 0.5
W = np.random.RandomState(2).randn(4, 3).astype("float32")

# (name, the function on two tensors a, b); each runs as op nodes and as one Lambda layer.
OPERATORS = [
    ("add", lambda a, b: a + b), ("radd", lambda a, b: 2.5 + a), ("sub", lambda a, b: a - b),
    ("rsub", lambda a, b: 1 - a), ("mul", lambda a, b: a * b), ("rmul", lambda a, b: 3 * a),
    ("truediv", lambda a, b: a / 255.0), ("rtruediv", lambda a, b: 1.0 / b), ("floordiv", lambda a, b: a // 0.5),
    ("rfloordiv", lambda a, b: 7.0 // b), ("mod", lambda a, b: a % 0.7), ("rmod", lambda a, b: 5.0 % b),
    ("pow", lambda a, b: b ** 2), ("rpow", lambda a, b: 2.0 ** a), ("matmul", lambda a, b: a @ torch.from_numpy(W)),
    ("neg", lambda a, b: -a), ("abs", lambda a, b: abs(a)), ("lt", lambda a, b: a < b), ("gt", lambda a, b: a > b),
    ("le", lambda a, b: a <= b), ("ge", lambda a, b: a >= b), ("ne", lambda a, b: a != b),
    ("getitem", lambda a, b: a[:, 1:3]), ("newaxis", lambda a, b: a[:, None, ::2]), ("ellipsis", lambda a, b: a[..., -1]),
    ("chain", lambda a, b: (a + b) * (a - 1.0) / 2.0),
    ("torch_left", lambda a, b: torch.full((4,), 3.0) - a + torch.full((4,), 2.0) ** b / torch.ones(4)),
]


def _inputs():
    return K.Input((4,), name="a"), K.Input((4,), name="b")


def _assert_node_equals_lambda(fn):
    """``fn`` on KerasTensors (op nodes) and inside one Lambda layer: same numbers, dtype and shape."""
    a, b = _inputs()
    model = K.Model([a, b], fn(a, b))
    a2, b2 = _inputs()
    reference = K.Model([a2, b2], K.layers.Lambda(lambda t: fn(t[0], t[1]))([a2, b2]))
    got, want = model([X, Y]), reference([X, Y])
    assert got.dtype == want.dtype and torch.equal(got, want)
    assert model.output_shape == (None,) + tuple(want.shape[1:])


@pytest.mark.parametrize("name,fn", OPERATORS, ids=[n for n, _ in OPERATORS])
def test_each_operator_is_a_node_equal_to_a_lambda_layer(name, fn):
    _assert_node_equals_lambda(fn)


OPS = [
    ("ops.add", lambda a, b: ops.add(a, b)), ("ops.concatenate", lambda a, b: ops.concatenate([a, b], axis=1)),
    ("ops.relu", lambda a, b: ops.relu(a)), ("ops.mean", lambda a, b: ops.mean(a, axis=1)),
    ("ops.expand_dims", lambda a, b: ops.expand_dims(a, -1)), ("ops.reshape", lambda a, b: ops.reshape(a, (-1, 2, 2))),
    ("ops.softmax", lambda a, b: ops.softmax(a * b)), ("activations.gelu", lambda a, b: K.activations.gelu(a)),
    ("activations.tanh", lambda a, b: K.activations.tanh(a)),
    ("md.concat", lambda a, b: md.concat([a, b], axis=1)), ("md.reduce_mean", lambda a, b: md.reduce_mean(a, axis=1)),
    ("md.reshape", lambda a, b: md.reshape(a, (-1, 2, 2))), ("md.expand_dims", lambda a, b: md.expand_dims(b, 1)),
    ("md.cast", lambda a, b: md.cast(a, md.int32)), ("md.math.reduce_max", lambda a, b: md.math.reduce_max(b, 1)),
]


@pytest.mark.parametrize("name,fn", OPS, ids=[n for n, _ in OPS])
def test_ops_on_keras_tensors_equal_a_lambda_layer(name, fn):
    _assert_node_equals_lambda(fn)


def test_shapes_dtypes_and_identity_as_keras_3():
    a, b = _inputs()
    assert (a == a, a == b, {a: 1}[a]) == (True, False, 1)   # == and hash stay identity (Keras 3)
    assert (a != b).dtype == torch.bool and (a < b).shape == (None, 4)
    assert ops.shape(a) == (None, 4) and ops.dtype(a) == "float32"
    assert ops.mean(a, axis=0).shape == (4,)             # a reduction over the batch: a known shape
    assert ops.transpose(a).shape == (4, None)
    assert md.split(a, 2, axis=1)[1].shape == (None, 2)
    seq = K.Input((None, 3))
    assert (seq[:, -1] * 2).shape == (None, 3) and ops.mean(seq, axis=1).shape == (None, 3)
    with pytest.raises(TypeError, match="boolean"):
        bool(a < b)
    with pytest.raises(ValueError, match="must match"):
        a + K.Input((3,))


def test_summary_and_layers_name_op_nodes_as_keras():
    a, b = _inputs()
    x = md.concat([a + b, ops.mean(a, axis=1, keepdims=True)], axis=1)
    model = K.Model([a, b], x)
    lines = []
    model.summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert "add (Add)" in text and "mean (Mean)" in text and "tf.concat (TFOpLambda)" in text
    assert "a[0][0], b[0][0]" in text
    names = [layer.name for layer in model.layers]   # Keras 3's operations are not layers; TFOpLambda is
    assert names[:2] == ["a", "b"] and names[2].startswith("tf.concat") and len(names) == 3
    assert model.output_shape == (None, 5)


def _residual_mlp():
    inputs = K.Input((6,))
    x = inputs / 255.0
    x = K.layers.Dense(8, activation="relu")(x)
    residual = x
    x = K.layers.Dense(8, activation="relu")(x)
    x = x + residual
    x = ops.concatenate([x, ops.expand_dims(ops.mean(x, axis=1), -1)], axis=1)
    return K.Model(inputs, K.layers.Dense(1)(md.reshape(x, (-1, 9))))


def test_residual_mlp_trains_and_saves(tmp_path):
    md.keras.utils.set_random_seed(0)
    model = _residual_mlp()
    model.compile("adam", "mse")
    data = np.random.RandomState(3).rand(32, 6).astype("float32") * 255
    target = data[:, :1] / 255.0
    history = model.fit(data, target, batch_size=8, epochs=3, verbose=0).history["loss"]
    assert history[-1] < history[0]
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = K.models.load_model(path)
    assert torch.equal(model(data), loaded(data))
    assert [l.name for l in loaded.layers] == [l.name for l in model.layers]


def test_saved_arguments_round_trip(tmp_path):
    a, b = _inputs()
    const = np.arange(4, dtype="float32")
    out = [a[:, None, ..., ::2], md.cast(a, md.int32) % 3, a * torch.tensor(const), ops.concatenate((a, b), axis=-1),
           K.activations.tanh(b), K.activations.get("relu")(a), torch.ones(4) - b]
    model = K.Model([a, b], out)
    model.save(str(tmp_path / "m.keras"))
    loaded = K.models.load_model(str(tmp_path / "m.keras"))
    for got, want in zip(loaded([X, Y]), model([X, Y])):
        assert got.dtype == want.dtype and torch.equal(got, want)
    config = json.dumps(model.get_config())
    assert '"function": "tf.cast"' in config and '"function": "keras.ops.subtract"' in config and '"function": "keras.ops.get_item"' in config


def test_an_unserializable_op_is_refused_at_save(tmp_path):
    a = K.Input((4,))
    model = K.Model(a, torch.sin(a) + 1)   # a torch function on a KerasTensor runs, but has no saved name
    assert torch.allclose(model(X), torch.sin(X) + 1)
    with pytest.raises(ValueError, match=r"torch\.sin.*register_keras_serializable"):
        model.save(str(tmp_path / "m.keras"))


def test_residual_mlp_two_replicas_equal_one_device():
    run_fresh("""
        import numpy as np, torch, multidev as md
        from tests.keras.test_symbolic_ops import _residual_mlp
        cpu = md.config.list_physical_devices("CPU")[0]
        md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
        data = np.random.RandomState(3).rand(32, 6).astype("float32") * 255
        target = data[:, :1] / 255.0
        md.keras.utils.set_random_seed(0)
        one = _residual_mlp(); start = one.get_weights()
        one.compile(md.keras.optimizers.SGD(0.05), "mse")
        h1 = one.fit(data, target, batch_size=8, epochs=2, shuffle=False, verbose=0).history["loss"]
        strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        assert strategy.num_replicas_in_sync == 2
        with strategy.scope():
            two = _residual_mlp(); two.set_weights(start)
            two.compile(md.keras.optimizers.SGD(0.05), "mse")
        h2 = two.fit(data, target, batch_size=8, epochs=2, shuffle=False, verbose=0).history["loss"]
        np.testing.assert_allclose(h1, h2, rtol=1e-5)
        for w1, w2 in zip(one.get_weights(), two.get_weights()):
            np.testing.assert_allclose(w1, w2, rtol=1e-5, atol=1e-6)
        print("ok")
    """)


def test_neighbouring_idioms():
    a = K.Input((4,))
    x = a
    x += a                                  # in-place add on a KerasTensor: a new node, as Keras
    y = np.float32(2) * a                   # a numpy scalar on the left
    ints = K.Input((3,), dtype="int32")
    assert (ints // 2).dtype == torch.int32 and (ints / 2).dtype == torch.float32   # Keras 3's dtype rules
    inner = K.Model(a, ops.relu(x * y))
    b = K.Input((4,))
    outer = K.Model(b, inner(b) - 1)        # an op on a nested model's output
    assert torch.equal(outer(X), torch.relu((X + X) * (2 * X)) - 1)


def test_shapes_dtypes_and_values_are_keras_3s():
    """The cases of symbolic_ops_cases.py against Keras 3.15 (TF 2.21), recorded by record_symbolic_ops.py."""
    from tests.keras.symbolic_ops_cases import run
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf_2.21_symbolic_ops.json")) as f:
        want = json.load(f)["cases"]
    got = run(K, ops)
    assert sorted(got) == sorted(want)
    for name in want:
        assert (got[name]["shape"], got[name]["dtype"]) == (want[name]["shape"], want[name]["dtype"]), name
        np.testing.assert_allclose(got[name]["value"], want[name]["value"], rtol=1e-5, atol=1e-6, err_msg=name)
