"""``md.keras.ops.vectorized_map`` of a function torch's vmap cannot batch falls back to a loop, as TensorFlow's
``tf.vectorized_map`` (``fallback_to_while_loop=True``) and Keras 3 on TensorFlow do: keras.io's Forward-Forward
writes each sample's label into it with ``xla.dynamic_update_slice(zeros, max, [y_sample])`` (``ops.slice_update``
at a per-sample index) under ``ops.vectorized_map`` (torch's "vmap: ... calling .item()" RuntimeError before)."""

import numpy as np
import torch

import multidev as md

ops = md.keras.ops


def overlay(data):
    x, y = data
    update = ops.slice_update(ops.zeros([3], dtype="float64"), [y], ops.amax(x, axis=0, keepdims=True))
    return ops.slice_update(x, [0], update), y


def test_per_sample_index_falls_back_to_a_loop():
    x = np.arange(12, dtype="float64").reshape(3, 4)
    y = np.array([2, 0, 1])
    out, labels = ops.vectorized_map(overlay, (x, y))
    want = x.copy()
    want[:, :3] = 0
    want[np.arange(3), y] = x.max(axis=1)
    np.testing.assert_array_equal(np.asarray(out), want)
    np.testing.assert_array_equal(np.asarray(labels), y)


def test_vectorizable_functions_still_use_vmap(monkeypatch):
    calls = []
    real = torch.vmap
    monkeypatch.setattr(torch, "vmap", lambda f: calls.append(f) or real(f))
    out = ops.vectorized_map(lambda v: v * 2, np.ones((3, 2), "float32"))
    assert calls and np.asarray(out).tolist() == [[2.0, 2.0]] * 3
