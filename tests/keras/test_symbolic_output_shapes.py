"""Output shapes of a functional model over a None sequence length (keras.io's Transformers: p13, p20) stay None
as TF 2.21 reports them (tests/keras/tf_2.21_output_shapes.json), after ``fit`` on length-6 batches too: the
model's ``output_shape`` is its graph's, not the last batch's, and a Sequential inside a layer, built by its first
(symbolic) call, shows None where the dummy lengths of shape inference vary."""

from __future__ import annotations

import json
import os

import numpy as np

import multidev as md

keras = md.keras
L = keras.layers
HERE = os.path.dirname(os.path.abspath(__file__))
TF = json.load(open(os.path.join(HERE, "tf_2.21_output_shapes.json")))
K3, TK2 = TF["keras3"], TF["tf_keras2"]


class Block(L.Layer):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.dense_proj = keras.Sequential([L.Dense(8, activation="relu"), L.Dense(4)])

    def call(self, x):
        return self.dense_proj(x)


def _trained():
    inp = keras.Input((None,), dtype="int32")
    out = L.Dense(3)(Block()(L.Embedding(10, 4)(inp)))
    model = keras.Model(inp, out)
    seq = keras.Sequential([keras.Input((None, 4)), L.Dense(2)])
    model.compile("adam", "mse")
    model.fit(np.ones((4, 6), "int32"), np.ones((4, 6, 3), "float32"), verbose=0)
    seq.predict(np.ones((2, 6, 4), "float32"), verbose=0)
    return model, seq


def test_output_shapes_keep_unknown_lengths_after_fit():
    model, seq = _trained()
    block = model.layers[2]
    assert str(model.output_shape) == K3["model_output_shape"] == TK2["model_output_shape"] == "(None, None, 3)"
    assert str(block.output_shape) == TK2["block_output_shape"]
    assert str(block.dense_proj.output_shape) == K3["dense_proj_output_shape"] == TK2["dense_proj_output_shape"]
    assert [str(l.output_shape) for l in block.dense_proj.layers] == TK2["dense_proj_layers_output_shape"]
    assert str(seq.output_shape) == K3["sequential_with_input_output_shape"] == TK2["sequential_with_input_output_shape"]


def test_summary_shows_the_unknown_lengths(capsys):
    model, _ = _trained()
    model.summary()
    model.layers[2].dense_proj.summary()
    out = capsys.readouterr().out
    assert "(None, None, 3)" in out and "(None, None, 8)" in out and ", 6," not in out and "24" not in out


def test_a_layer_called_eagerly_first_keeps_its_concrete_shape():
    dense = L.Dense(2)
    dense(np.ones((3, 5, 4), "float32"))
    assert dense.output_shape == (None, 5, 2)
