"""``Model.input``/``Model.output`` and ``layer.output`` as in Keras, and ``md.train`` as an attribute (issue 17 #13)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import multidev as md

L = md.keras.layers


def test_functional_input_and_output_are_the_graph_tensors():
    inputs = L.Input(shape=(4,))
    outputs = L.Dense(2)(inputs)
    model = md.keras.Model(inputs=inputs, outputs=outputs)
    assert model.input is inputs and model.output is outputs
    assert model.input.shape == (None, 4) and model.output.shape == (None, 2)


def test_several_inputs_and_outputs_are_lists():
    a, b = L.Input(shape=(2,)), L.Input(shape=(3,))
    joined = L.Concatenate()([a, b])
    model = md.keras.Model(inputs=[a, b], outputs=[joined, L.Dense(1)(joined)])
    assert model.input == [a, b]
    assert [o.shape for o in model.output] == [(None, 5), (None, 1)]


def test_sequential_with_input_exposes_it_and_feature_extraction_works():
    """Keras's feature-extraction idiom: Model(seq.input, seq.get_layer(name).output)."""
    inputs = L.Input(shape=(3,))
    seq = md.keras.Sequential([inputs, L.Dense(5, name="hidden"), L.Dense(1)])
    assert seq.input is inputs
    assert seq.output.shape == (None, 1)
    features = md.keras.Model(seq.input, seq.get_layer("hidden").output)
    x = np.arange(6, dtype="float32").reshape(2, 3)
    expected = seq.get_layer("hidden")(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(features.predict(x, verbose=0), expected, rtol=1e-5, atol=1e-6)
    assert features.output.shape == (None, 5)


def test_sequential_built_with_build_has_an_input():
    seq = md.keras.Sequential([L.Dense(5)])
    with pytest.raises(AttributeError):
        seq.input                          # Keras: no defined input before the shape is known
    seq.build((None, 7))
    assert seq.input.shape == (None, 7) and seq.output.shape == (None, 5)


def test_subclassed_model_has_no_symbolic_input():
    class Net(md.keras.Model):
        def __init__(self):
            super().__init__()
            self.d = L.Dense(1)

        def call(self, x):
            return self.d(x)

    with pytest.raises(AttributeError):
        Net().output


def test_layer_never_called_has_no_output():
    with pytest.raises(AttributeError, match="never been called"):
        L.Dense(3)._first_node("outputs", "output")


def test_md_train_is_an_attribute_after_import():
    import importlib
    import subprocess
    import sys

    code = "import multidev as md; print(md.train.ClusterSpec.__name__, 'train' in md.__all__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ClusterSpec", "True"]
    assert importlib.import_module("multidev").train is md.train
