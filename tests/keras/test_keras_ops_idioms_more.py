"""``md.keras.ops``' added names beyond one call each: submodules, control flow, custom gradients, functional
models that train and save, readable results, where md.keras follows numpy/TensorFlow rather than Keras 3 on
torch, and bad arguments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from multidev.keras import ops
from tests.integrations._keras3_env import import_keras3
from tests.keras.test_keras_ops import _same
from tests.keras.test_keras_ops_more import A, CUBE, I, IDS, KV, L, P, Q, V, X, Y

keras = import_keras3()


def test_ndim_and_submodules():
    assert ops.ndim(CUBE) == keras.ops.ndim(CUBE) == 3 and ops.ndim(2.0) == 0
    for name in ("glu", "celu", "hard_silu", "sparse_plus"):
        assert getattr(ops.nn, name) is getattr(ops, name)
    for name in [n for n in dir(keras.ops.linalg) if not n.startswith("_")]:
        assert callable(getattr(ops.linalg, name)), name
    for name in ("glu", "svd", "hypot", "median", "bitwise_and", "linalg"):
        assert name in ops.__all__
    # keras.ops.numpy.X / keras.ops.nn.X as Keras 3 lists them: the flat op itself, wherever md.keras defines it
    assert ops.numpy.sqrt is ops.sqrt and ops.numpy.hypot is ops.hypot and ops.numpy.median is ops.median
    assert ops.nn.relu is ops.relu and ops.nn.log_sigmoid is ops.log_sigmoid
    torch.testing.assert_close(ops.numpy.sqrt(P), keras.ops.numpy.sqrt(P))
    with pytest.raises(AttributeError, match="Keras 3 has `keras.ops.image.affine_transform`"):
        ops.image.affine_transform
    with pytest.raises(AttributeError, match="has no `keras.ops.numpy.relu` either"):
        ops.numpy.relu


def test_where_md_keras_follows_numpy_rather_than_keras_on_torch():
    # Keras 3 on torch rejects these (torch.vdot is 1-D only, array_split wants an int, log_sigmoid no ints)
    # and turns cumprod(dtype="float64") into float32; numpy (and TF's experimental numpy) do what md.keras does.
    torch.testing.assert_close(ops.vdot(X, Y), (X * Y).sum())
    assert [p.tolist() for p in ops.array_split(L, [1, 4])] == [L[:1].tolist(), L[1:4].tolist(), L[4:].tolist()]
    torch.testing.assert_close(ops.log_sigmoid(I), torch.nn.functional.logsigmoid(I.float()))
    assert ops.cumprod(X, dtype="float64").dtype == torch.float64
    # Keras 3.15 on torch: saturate_cast of int32 to float32 gives -2**31 everywhere; bincount of 2-D ids
    # without minlength fails when rows need different lengths
    torch.testing.assert_close(ops.saturate_cast(I, "float32"), I.float())
    # correlate's 'same' of a shorter first input: numpy's length (Keras 3 on torch gives the shorter one)
    a, v = torch.tensor([1.0, 10.0], dtype=torch.float64), torch.arange(1.0, 6.0, dtype=torch.float64)
    assert ops.correlate(a, v, "same").tolist() == [54.0, 43.0, 32.0, 21.0, 10.0]   # numpy.correlate's
    assert ops.bincount(torch.tensor([[0, 2], [1, 1]])).tolist() == [[1, 0, 1], [0, 2, 0]]
    # Keras 3.15's torch sparsemax sums the cumulative sums over the support (all zeros here); sparsemax
    # projects onto the simplex: [1.3, 0.5, 0.1, 1.2] -> tau = (1.3 + 1.2 - 1) / 2
    out = ops.sparsemax(torch.tensor([[1.3, 0.5, 0.1, 1.2]]))
    torch.testing.assert_close(out, torch.tensor([[0.55, 0.0, 0.0, 0.45]]))
    torch.testing.assert_close(ops.sum(ops.sparsemax(CUBE, 1), 1), torch.ones(2, 4))
    # an empty segment's min of ints is the dtype's max, as TensorFlow's (Keras 3 on torch gives its min)
    assert ops.segment_min(I, IDS, 4)[1].tolist() == [2**31 - 1] * 4
    # beyond Keras on torch (4-D only there; soft cap JAX-on-TPU only): unbatched inputs, a soft cap
    torch.testing.assert_close(ops.dot_product_attention(Q[0], KV[0], KV[0]), ops.dot_product_attention(Q, KV, KV)[0])
    # layer_normalization over a middle axis with gamma (Keras 3 on torch fails there)
    var, mean = torch.var_mean(CUBE, dim=1, keepdim=True, correction=0)
    torch.testing.assert_close(ops.layer_normalization(CUBE, P[:, 0], None, 1),
                               (CUBE - mean) / torch.sqrt(var + 1e-7) * P[:, 0].reshape(1, 3, 1))
    capped = ops.dot_product_attention(Q, KV, KV, attn_logits_soft_cap=1e6)
    torch.testing.assert_close(capped, ops.dot_product_attention(Q, KV, KV), rtol=1e-4, atol=1e-5)


def test_same_pooling_equals_tensorflow():
    # Keras 3.15 on torch averages 'same' windows of size 3, stride 2 differently from TensorFlow (by 0.5 on
    # unit-scale data); md.keras gives TensorFlow 2.21's numbers (recorded in tf_2.21_pooling_same.json)
    tf = json.loads((Path(__file__).parent / "tf_2.21_pooling_same.json").read_text())
    x = (torch.arange(144, dtype=torch.float32).reshape(2, 4, 6, 3) % 11) / 4
    torch.testing.assert_close(ops.average_pool(x, 3, 2, "same"), torch.tensor(tf["avg_pool2d_k3_s2_same"]))
    torch.testing.assert_close(ops.max_pool(x, 3, 2, "same"), torch.tensor(tf["max_pool2d_k3_s2_same"]))
    torch.testing.assert_close(ops.average_pool(x[:, 0], 3, 2, "same"), torch.tensor(tf["avg_pool1d_k3_s2_same"]))


def test_control_flow_equals_keras3():
    k = keras.ops
    step = lambda c, x: (c + x, c * x)  # noqa: E731
    for kwargs in ({}, {"reverse": True}):
        _same(ops.scan(step, torch.zeros(4), X, **kwargs), k.scan(step, torch.zeros(4), X, **kwargs), f"scan {kwargs}")
    pair = lambda c, x: ((c[0] + x["a"], c[1]), x["a"] - x["b"])  # noqa: E731
    _same(ops.scan(pair, (torch.zeros(4), 1.0), {"a": X, "b": Y}), k.scan(pair, (torch.zeros(4), 1.0), {"a": X, "b": Y}),
          "scan of structures")
    _same(ops.map(lambda r: r * 2, X), k.map(lambda r: r * 2, X), "map")
    _same(ops.map(lambda r: (r.sum(), r.max()), X), k.map(lambda r: (r.sum(), r.max()), X), "map to tuples")
    _same(ops.vectorized_map(lambda r: r @ r, X), k.vectorized_map(lambda r: r @ r, X), "vectorized_map")
    for index in (0, 1, 5, -2):
        _same(ops.switch(index, [lambda a: a + 1, lambda a: a * 3], X), k.switch(index, [lambda a: a + 1, lambda a: a * 3], X),
              f"switch {index}")
    for kwargs in ({}, {"reverse": True}, {"axis": 1}):
        _same(ops.associative_scan(torch.add, X, **kwargs), k.associative_scan(torch.add, X, **kwargs), f"assoc {kwargs}")
    f = lambda a, b: a * b + 1  # noqa: E731
    _same(ops.vectorize(f)(X, Y[0]), k.vectorize(f)(X, Y[0]), "vectorize")


def test_custom_gradient_both_grad_forms():
    def make(torch_form):
        @ops.custom_gradient
        def log1pexp(x):
            e = ops.exp(x)
            if torch_form:
                def grad(*args, upstream):
                    return upstream * (1.0 - 1.0 / (1 + e))
            else:
                def grad(upstream):
                    return upstream * (1.0 - 1.0 / (1 + e))
            return ops.log(1 + e), grad
        return log1pexp
    for torch_form in (False, True):
        x = torch.tensor([0.0, 100.0, -3.0], requires_grad=True)
        y = make(torch_form)(x)
        y.sum().backward()
        torch.testing.assert_close(x.grad, torch.sigmoid(x.detach()))   # finite at 100, where autograd gives NaN


def test_new_ops_build_functional_models_that_train_and_save(tmp_path):
    # a Keras 3 functional model written with the new ops: op nodes that run, save by name and load
    from multidev import keras as K
    K.utils.set_random_seed(0)
    inputs = K.Input((6, 4))
    x = ops.conv(K.layers.Dense(8)(inputs), torch.ones(3, 8, 8) / 24, padding="same")
    x = ops.layer_normalization(ops.glu(x), epsilon=1e-3)
    x = ops.concatenate([ops.median(x, axis=1), ops.logaddexp(ops.max_pool(x, 2)[:, 0], 0.0)], axis=-1)
    model = K.Model(inputs, K.layers.Dense(1)(x))
    data = torch.randn(16, 6, 4, generator=torch.Generator().manual_seed(1))
    model.compile("adam", "mse")
    history = model.fit(data, data[:, :1, 0], batch_size=8, epochs=3, verbose=0).history["loss"]
    assert history[-1] < history[0]
    model.save(str(tmp_path / "m.keras"))
    loaded = K.models.load_model(str(tmp_path / "m.keras"))
    assert torch.equal(loaded(data), model(data))
    assert '"function": "keras.ops.glu"' in json.dumps(model.get_config())


def test_argpartition_partitions_around_kth():
    for axis, kth in ((-1, 2), (0, 1)):
        idx = ops.argpartition(X, kth, axis=axis)
        part = torch.take_along_dim(X, idx.long(), dim=axis).movedim(axis, -1)
        pivot = part[..., kth:kth + 1]
        assert idx.dtype == torch.int32 and (part[..., :kth] <= pivot).all() and (part[..., kth:] >= pivot).all()
        torch.testing.assert_close(pivot.squeeze(-1), torch.sort(X.movedim(axis, -1)).values[..., kth])


def test_results_outside_layers_are_readable():
    w = X.clone().requires_grad_()
    assert float(ops.median(w).numpy()) == float(torch.quantile(X, 0.5))   # .numpy() while it carries gradients
    assert ops.nn.glu is ops.glu and ops.linalg.svd is ops.svd and ops.numpy.hypot is ops.hypot


def test_jvp_equals_keras3():
    fun = lambda x: torch.sin(x) * x  # noqa: E731
    ours = ops.linalg.jvp(fun, (V,), (torch.ones_like(V),))
    _same(ours, keras.ops.linalg.jvp(fun, (V,), (torch.ones_like(V),)), "jvp")


def test_gradients_flow_through_new_ops():
    x = X.clone().requires_grad_()
    ops.sum(ops.glu(ops.hypot(x, 1.0)) + ops.logaddexp(x, 0.0).mean() + ops.median(x)).backward()
    expected = X.clone().requires_grad_()
    k = keras.ops
    k.sum(k.glu(k.hypot(expected, 1.0)) + k.logaddexp(expected, 0.0).mean() + k.median(expected)).backward()
    torch.testing.assert_close(x.grad, expected.grad)


@pytest.mark.parametrize("call,error,match", [
    (lambda: ops.rot90(V), ValueError, "at least 2 dimensions"),
    (lambda: ops.searchsorted(X, V), ValueError, "must be 1-D"),
    (lambda: ops.searchsorted(V, V, side="middle"), ValueError, "'left' or 'right'"),
    (lambda: ops.glu(torch.ones(2, 3)), ValueError, "must be even"),
    (lambda: ops.det(V), ValueError, "rank >= 2"),
    (lambda: ops.inv(X), ValueError, "square"),
    (lambda: ops.qr(A, mode="full"), ValueError, "'reduced' or 'complete'"),
    (lambda: ops.unique(L, size=3), NotImplementedError, "Keras 3 on multidev"),
    (lambda: ops.rearrange(X, "a b -> a"), ValueError, "same axes"),
    (lambda: ops.rearrange(X, "(a b) c -> a b c", a=2), ValueError, "cannot split"),
    (lambda: ops.rearrange(X, "a ... -> a"), ValueError, "no '...'"),
])
def test_bad_arguments_raise_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()
